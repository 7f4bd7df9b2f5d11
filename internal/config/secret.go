package config

import (
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Secret is a password, a token or another credential. It never comes from the
// configuration file: from the environment variable of its field, or from a file named by
// the field of the same name with _file appended (nats.password_file). Every way of
// printing or encoding it (fmt, JSON, YAML, text, zap) shows [redacted], or nothing when
// it is empty; [Secret.Reveal] gives the value to the client that needs it.
type Secret string

// redacted is how a Secret that is set prints.
const redacted = "[redacted]"

// Reveal returns the secret's value. Call it only where a client is handed its
// credentials, never to log or report.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s != "" }

// String is "[redacted]", or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString is String, quoted: %#v shows no more than %v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// Format prints String with the verb and flags given, whatever they are.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), s.String())
}

// MarshalJSON encodes String.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText encodes String.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML encodes String.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// errSecretInFile is the message of a Secret given a value in the configuration file;
// decodeStrict turns it into one naming the field, its _file field and its variable.
const errSecretInFile = "secrets are not read from the configuration file"

// UnmarshalYAML refuses a value: a secret in a file that is often committed, copied and
// shown would not be one. An empty value (or none) is allowed, so that a file can list the
// key with a comment saying where the secret comes from.
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!null" || n.Value == "") {
		*s = ""
		return nil
	}
	// Never the value: the message says where it is, by line and column.
	msg := errSecretInFile
	if n.Kind != yaml.ScalarNode {
		msg = "want a string, got " + describeTag(n.ShortTag())
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s (column %d)", n.Line, msg, n.Column)}}
}

// NATSURLs is a NATS server URL, or several separated by commas, which may carry
// credentials (nats://user:password@host, nats://token@host). Every way of printing or
// encoding it shows it as [RedactNATSURLs] does; [NATSURLs.Reveal] gives it to the client.
type NATSURLs string

// Reveal returns the URLs as they are, credentials included.
func (u NATSURLs) Reveal() string { return string(u) }

// String is the URLs without their credentials.
func (u NATSURLs) String() string { return RedactNATSURLs(string(u)) }

// GoString is String, quoted.
func (u NATSURLs) GoString() string { return fmt.Sprintf("%q", u.String()) }

// Format prints String with the verb and flags given.
func (u NATSURLs) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, u.GoString())
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), u.String())
}

// MarshalJSON encodes String.
func (u NATSURLs) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// MarshalText encodes String.
func (u NATSURLs) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// MarshalYAML encodes String.
func (u NATSURLs) MarshalYAML() (any, error) { return u.String(), nil }
