package main

import (
	"os"
	"strings"

	"github.com/quarantine-dev/quarantine/api"
)

// MetricsConfig is the `metrics:` key: credentials that protect
// /metrics (a bearer token, or basic auth, or both), read from files so
// that the configuration holds no secret. Empty leaves /metrics open.
type MetricsConfig struct {
	Token    Secret
	User     string
	Password Secret
}

type fileMetrics struct {
	TokenFile         string `yaml:"token_file"`
	BasicUser         string `yaml:"basic_user"`
	BasicPasswordFile string `yaml:"basic_password_file"`
}

// decodeMetrics reads `metrics:`, and the files it names.
func (s *configSource) decodeMetrics(f fileMetrics, m *MetricsConfig) error {
	read := func(key, path string) (Secret, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", s.errorf(key, "cannot read %q: %v", path, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", s.errorf(key, "%q is empty", path)
		}
		return Secret(v), nil
	}
	if f.TokenFile != "" {
		t, err := read("metrics.token_file", f.TokenFile)
		if err != nil {
			return err
		}
		m.Token = t
	}
	switch {
	case f.BasicUser != "" && f.BasicPasswordFile == "":
		return s.errorf("metrics.basic_password_file", "basic_user needs basic_password_file")
	case f.BasicUser == "" && f.BasicPasswordFile != "":
		return s.errorf("metrics.basic_user", "basic_password_file needs basic_user")
	case f.BasicUser != "":
		if strings.ContainsAny(f.BasicUser, ":\r\n") {
			return s.errorf("metrics.basic_user", "a user name cannot hold ':' or a line break")
		}
		p, err := read("metrics.basic_password_file", f.BasicPasswordFile)
		if err != nil {
			return err
		}
		m.User, m.Password = f.BasicUser, p
	}
	return nil
}

// auth returns the API's view of m (nil when /metrics stays open).
func (m MetricsConfig) auth() *api.MetricsAuth {
	if m.Token == "" && m.User == "" {
		return nil
	}
	return &api.MetricsAuth{Token: m.Token.Reveal(), User: m.User, Password: m.Password.Reveal()}
}
