package nats

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	url := "nats://127.0.0.1:4222"
	adv := &AdvisoryConfig{Stream: "ORDERS", Consumer: "worker"}
	cases := []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"failure stream", Config{URL: url, Stream: "FAILED"}, ""},
		{"failure stream with subject and consumer", Config{URL: url, Stream: "FAILED", Subject: "failed.*.>", Consumer: "c-1", AckWait: time.Minute}, ""},
		{"advisories", Config{URL: url, Advisories: adv, DeleteAfterStore: true, ReconcileEvery: 5 * time.Second}, ""},
		{"several servers", Config{URL: "nats://a:4222, tls://user:pw@b:4222", Stream: "F"}, ""},
		{"no url", Config{Stream: "F"}, "url"},
		{"bad scheme", Config{URL: "http://x:1", Stream: "F"}, "url"},
		{"no host", Config{URL: "nats://", Stream: "F"}, "url"},
		{"neither mode", Config{URL: url}, "stream"},
		{"both modes", Config{URL: url, Stream: "F", Advisories: adv}, "advisories"},
		{"dotted stream", Config{URL: url, Stream: "a.b"}, "stream"},
		{"stream with space", Config{URL: url, Stream: "a b"}, "stream"},
		{"bad consumer", Config{URL: url, Stream: "F", Consumer: "c*"}, "consumer"},
		{"bad subject", Config{URL: url, Stream: "F", Subject: "a..b"}, "subject"},
		{"wildcard inside a token", Config{URL: url, Stream: "F", Subject: "a.b*"}, "subject"},
		{"> not last", Config{URL: url, Stream: "F", Subject: "a.>.b"}, "subject"},
		{"delete in mode a", Config{URL: url, Stream: "F", DeleteAfterStore: true}, "delete_after_store"},
		{"reconcile in mode a", Config{URL: url, Stream: "F", ReconcileEvery: time.Minute}, "reconcile_every"},
		{"subject in mode b", Config{URL: url, Advisories: adv, Subject: "x"}, "subject"},
		{"no advisory stream", Config{URL: url, Advisories: &AdvisoryConfig{Consumer: "w"}}, "advisories.stream"},
		{"no advisory consumer", Config{URL: url, Advisories: &AdvisoryConfig{Stream: "S"}}, "advisories.consumer"},
		{"capture is the worker stream", Config{URL: url, Advisories: &AdvisoryConfig{Stream: "S", Consumer: "w", CaptureStream: "S"}}, "advisories.capture_stream"},
		{"ack wait too short", Config{URL: url, Stream: "F", AckWait: time.Millisecond}, "ack_wait"},
		{"ack wait too long", Config{URL: url, Stream: "F", AckWait: 13 * time.Hour}, "ack_wait"},
		{"reconcile too often", Config{URL: url, Advisories: adv, ReconcileEvery: time.Millisecond}, "reconcile_every"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("Validate() = %v, want EINVALID on %q", err, tc.field)
			}
		})
	}
}

func TestConfigYAML(t *testing.T) {
	t.Parallel()
	raw := "url: nats://u:pw@127.0.0.1:4222\nadvisories: {stream: ORDERS, consumer: worker}\ndelete_after_store: true\nack_wait: 90s\nreconcile_every: 2m\n"
	var c Config
	if err := yaml.UnmarshalWithOptions([]byte(raw), &c, yaml.Strict()); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.AckWait != 90*time.Second || c.ReconcileEvery != 2*time.Minute || !c.DeleteAfterStore || c.Advisories.Consumer != "worker" {
		t.Fatalf("decoded %+v", c)
	}
	d := c.withDefaults("orders dlq.1")
	if d.Consumer != "quarantine-orders_dlq_1" || d.Advisories.CaptureStream != "QUARANTINE_ADV_ORDERS_worker" {
		t.Fatalf("defaults %+v %+v", d, d.Advisories)
	}
	if err := validateName("consumer", "consumer", d.Consumer); err != nil {
		t.Fatalf("derived consumer name invalid: %v", err)
	}
	long := captureStreamName(strings.Repeat("s", 200), strings.Repeat("c", 200))
	if err := validateName("x", "stream", long); err != nil {
		t.Fatalf("long capture name invalid: %v", err)
	}
	if c.Advisories.CaptureStream != "" {
		t.Fatal("withDefaults changed its receiver's advisories")
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"nats://alice:s3cret@h:4222", "nats://s3cret@h:4222", "nats://h:1,tls://bob:s3cret@h2:2"} {
		if r := redacturl.List(u); strings.Contains(r, "s3cret") || !strings.Contains(r, "<secret>") {
			t.Errorf("redacturl.List(%q) = %q", u, r)
		}
	}
	var buf bytes.Buffer
	c := Config{URL: "nats://alice:s3cret@127.0.0.1:4222", Stream: "F"}.withDefaults("x")
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", c)
	if strings.Contains(buf.String(), "s3cret") || !strings.Contains(buf.String(), "alice") {
		t.Fatalf("log line: %s", buf.String())
	}
	_, err := NewSource("x", Config{URL: "http://alice:s3cret@h", Stream: "F"}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("NewSource error %v", err)
	}
}

func TestSubjectMatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		filter, subject string
		want            bool
	}{
		{"a.b", "a.b", true}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.>", "a.b.c", true},
		{"a.>", "a", false}, {">", "x", true}, {"a.b", "a.c", false}, {"*.b", "a.b", true},
	}
	for _, tc := range cases {
		if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}
