package config

import (
	"errors"
	"fmt"
	"strings"
)

// ParseZKConnect splits a ZooKeeper connect string,
// host:port[,host:port...][/chroot], into its servers and its chroot.
//
// Every server needs an explicit port. The chroot, when present, is a znode
// path: it starts with '/', does not end with '/', and has no empty, "." or
// ".." segment; chroot is "" when the string has none. The servers are
// returned in the order given.
//
// The ZooKeeper client library this project uses has no notion of chroot:
// callers prefix every path with the chroot themselves.
func ParseZKConnect(s string) (servers []string, chroot string, err error) {
	if s == "" {
		return nil, "", errors.New("empty connect string")
	}
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
		if err := checkZNodePath(chroot); err != nil {
			return nil, "", fmt.Errorf("%q: chroot %q: %w", s, chroot, err)
		}
	}
	if hosts == "" {
		return nil, "", fmt.Errorf("%q: no servers", s)
	}
	for server := range strings.SplitSeq(hosts, ",") {
		if server == "" {
			return nil, "", fmt.Errorf("%q: empty server in list", s)
		}
		if err := checkHostPort(server, false); err != nil {
			return nil, "", fmt.Errorf("%q: %w", s, describeServer(server, err))
		}
		servers = append(servers, server)
	}
	return servers, chroot, nil
}

// describeServer names the server in an address error when that helps: the
// bad-port message already shows the culprit.
func describeServer(server string, err error) error {
	if strings.HasPrefix(err.Error(), "bad port") {
		return err
	}
	return fmt.Errorf("server %q: %w", server, err)
}

// checkZNodePath checks an absolute znode path other than the root.
func checkZNodePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case p[0] != '/':
		return errors.New("must start with '/'")
	case p == "/":
		return errors.New("must name a znode below '/'")
	case strings.HasSuffix(p, "/"):
		return errors.New("must not end with '/'")
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case "":
			return errors.New("empty path segment")
		case ".", "..":
			return fmt.Errorf("relative path segment %q", seg)
		}
		if strings.ContainsRune(seg, 0) {
			return errors.New("NUL character in path")
		}
	}
	return nil
}
