package main

import (
	"time"

	"github.com/quarantine-dev/quarantine/web"
)

// AuthConfig is the `auth:` key: how people sign in to the web UI.
// Sessions live in the database: every instance on it shares them, and
// a restart keeps them. A session ends after SessionIdle without use,
// and SessionMax after the login at the latest.
type AuthConfig struct {
	SessionIdle time.Duration
	SessionMax  time.Duration
}

// Bounds of the session timeouts: the idle deadline moves a minute at a
// time (quarantine.SessionRefresh), so a shorter idle timeout is not
// kept exactly.
const (
	minSessionIdle = time.Minute
	maxSessionMax  = 30 * 24 * time.Hour
)

type fileAuth struct {
	SessionIdle any `yaml:"session_idle"`
	SessionMax  any `yaml:"session_max"`
}

func defaultAuthConfig() AuthConfig {
	return AuthConfig{SessionIdle: web.DefaultSessionIdle, SessionMax: web.DefaultSessionMax}
}

// decodeAuth reads the auth keys that are set into a.
func (s *configSource) decodeAuth(f fileAuth, a *AuthConfig) error {
	for _, k := range []struct {
		key string
		v   any
		dst *time.Duration
	}{
		{"auth.session_idle", f.SessionIdle, &a.SessionIdle},
		{"auth.session_max", f.SessionMax, &a.SessionMax},
	} {
		if k.v == nil {
			continue
		}
		d, problem := parseRetention(k.v, false)
		if problem != "" {
			return s.errorf(k.key, "%s", problem)
		}
		*k.dst = d
	}
	switch {
	case a.SessionIdle < minSessionIdle:
		return s.errorf("auth.session_idle", "%s is too short: at least 1m", a.SessionIdle)
	case a.SessionMax > maxSessionMax:
		return s.errorf("auth.session_max", "%s is too long: at most 30d", a.SessionMax)
	case a.SessionMax < a.SessionIdle:
		return s.errorf("auth.session_max", "%s is shorter than auth.session_idle (%s)", a.SessionMax, a.SessionIdle)
	}
	return nil
}
