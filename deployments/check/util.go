package check

import (
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// splitHostPort splits a host:port address and checks the port is a number.
func splitHostPort(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", err
	}
	return host, port, nil
}

// allInterfaces reports whether a listen host binds every interface.
func allInterfaces(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

// loopback reports whether host names this machine's loopback.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func regexpMatch(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

func mapsKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}

func yamlUnmarshal(data []byte, v any) error {
	return yaml.Unmarshal(data, v)
}
