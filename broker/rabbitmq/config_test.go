package rabbitmq

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{URL: "amqp://guest:hunter2@127.0.0.1:5672/", Queue: "orders.dlq"}
	cases := []struct {
		name  string
		mod   func(*Config)
		field string // "" means valid
		msg   string
	}{
		{"valid", func(*Config) {}, "", ""},
		{"amqps and vhost", func(c *Config) {
			c.URL = "amqps://u:p@mq.example:5671/prod"
			c.Prefetch = 65535
			c.SourceQueue = "orders"
		}, "", ""},
		{"no url", func(c *Config) { c.URL = " " }, "url", "needs url"},
		{"bad scheme", func(c *Config) { c.URL = "http://guest:hunter2@h/" }, "url", "scheme must be amqp"},
		{"no host", func(c *Config) { c.URL = "amqp://" }, "url", "no host"},
		{"unparsable", func(c *Config) { c.URL = "amqp://guest:hunter2@[::1" }, "url", "not a valid"},
		{"no queue", func(c *Config) { c.Queue = "" }, "queue", "required"},
		{"long queue", func(c *Config) { c.Queue = strings.Repeat("q", 256) }, "queue", "longer than 255"},
		{"bad queue", func(c *Config) { c.Queue = "a\xff" }, "queue", "UTF-8"},
		{"long source queue", func(c *Config) { c.SourceQueue = strings.Repeat("q", 256) }, "source_queue", "longer"},
		{"negative prefetch", func(c *Config) { c.Prefetch = -1 }, "prefetch", "between 0"},
		{"huge prefetch", func(c *Config) { c.Prefetch = 65536 }, "prefetch", "between 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field ||
				!strings.Contains(quarantine.ErrorMessage(err), tc.msg) {
				t.Fatalf("error %v, want EINVALID on %s saying %q", err, tc.field, tc.msg)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error shows the password: %v", err)
			}
			if _, err := NewSource("x", c, nil); err == nil {
				t.Fatal("NewSource accepted an invalid config")
			}
		})
	}
}

func TestConfigNeverPrintsThePassword(t *testing.T) {
	t.Parallel()
	c := Config{URL: "amqp://guest:hunter2@127.0.0.1:5672/vh", Queue: "orders.dlq"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "rabbitmq", c)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "rabbitmq", c, "ptr", &c)
	outs := []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprint(&c), buf.String()}
	for _, s := range outs {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("password printed: %s", s)
		}
		if !strings.Contains(s, "guest:") || !strings.Contains(s, "<secret>@127.0.0.1:5672/vh") {
			t.Fatalf("url not shown redacted: %s", s)
		}
	}
	// An unparsable URL is not shown at all.
	if s := redacturl.URL("amqp://guest:hunter2@[::1"); strings.Contains(s, "hunter2") {
		t.Fatalf("unparsable url shown: %s", s)
	}
}
