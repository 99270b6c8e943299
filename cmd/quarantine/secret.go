package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

// redacted is how every secret prints.
const redacted = "<secret>"

// Secret is a configuration value that must never be printed: String,
// every fmt verb, YAML, JSON and slog all give "<secret>". Reveal returns
// the value for the one place that needs it.
type Secret string

// Reveal returns the secret value itself.
func (s Secret) Reveal() string { return string(s) }

// String returns "<secret>".
func (s Secret) String() string { return redacted }

// Format prints "<secret>" for every verb, %#v and %q included.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalYAML returns "<secret>".
func (s Secret) MarshalYAML() (any, error) { return redacted, nil }

// MarshalJSON returns "<secret>" as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue returns "<secret>".
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// DatabaseURL is a database URL that prints with its password redacted
// (redacturl.Database) everywhere: String, fmt, YAML, JSON and slog.
type DatabaseURL string

// Reveal returns the URL with its password, to connect with.
func (u DatabaseURL) Reveal() string { return string(u) }

// String returns the URL with its password replaced by "<secret>".
func (u DatabaseURL) String() string { return redacturl.Database(string(u)) }

// Format prints the redacted URL for every verb (%q quotes it).
func (u DatabaseURL) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprintf(f, "%q", u.String())
		return
	}
	_, _ = f.Write([]byte(u.String()))
}

// MarshalYAML returns the redacted URL.
func (u DatabaseURL) MarshalYAML() (any, error) { return u.String(), nil }

// MarshalJSON returns the redacted URL as a JSON string.
func (u DatabaseURL) MarshalJSON() ([]byte, error) { return jsonString(u.String()), nil }

// LogValue returns the redacted URL.
func (u DatabaseURL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// jsonString encodes s as a JSON string, without escaping <, > and &.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
