package main

import (
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestLoadConfig_AuthSessions(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(writeConfig(t, "auth:\n  session_idle: 15m\n  session_max: 1d\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.SessionIdle != 15*time.Minute || c.Auth.SessionMax != 24*time.Hour {
		t.Fatalf("auth = %+v", c.Auth)
	}
	d := DefaultConfig()
	if d.Auth.SessionIdle != 30*time.Minute || d.Auth.SessionMax != 12*time.Hour {
		t.Fatalf("default auth = %+v, want 30m and 12h", d.Auth)
	}
}

func TestLoadConfig_AuthErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, field, want string }{
		{"idle too short", "auth:\n  session_idle: 10s\n", "auth.session_idle", "at least 1m"},
		{"idle no unit", "auth:\n  session_idle: 30\n", "auth.session_idle", "has no unit"},
		{"idle zero", "auth:\n  session_idle: 0\n", "auth.session_idle", "not a duration"},
		{"max below idle", "auth:\n  session_idle: 2h\n  session_max: 1h\n", "auth.session_max", "shorter than auth.session_idle"},
		{"max too long", "auth:\n  session_max: 60d\n", "auth.session_max", "at most 30d"},
		{"unknown key", "auth:\n  session_ttl: 1h\n", "auth.session_ttl", `unknown key "session_ttl"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadConfig(writeConfig(t, tc.yaml), envOf(nil))
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("err %v (field %q), want EINVALID on %s", err, quarantine.ErrorField(err), tc.field)
			}
			if msg := describe(err); !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q does not say %q", msg, tc.want)
			}
		})
	}
}
