package sqs

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/goccy/go-yaml"

	"github.com/quarantine-dev/quarantine"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	base := func() Config {
		return Config{Region: "us-east-1", QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/billing-dlq", SourceQueue: "billing"}
	}
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"region from the queue URL", func(c *Config) { c.Region = "" }, ""},
		{"goaws", func(c *Config) {
			c.Region, c.QueueURL, c.Endpoint, c.Protocol = "us-east-1", "http://127.0.0.1:4100/100010001000/dlq", "http://127.0.0.1:4100", "QUERY"
		}, ""},
		{"no queue url", func(c *Config) { c.QueueURL = "" }, "queue_url"},
		{"relative queue url", func(c *Config) { c.QueueURL = "/123/dlq" }, "queue_url"},
		{"queue url without queue", func(c *Config) { c.QueueURL = "https://sqs.us-east-1.amazonaws.com/" }, "queue_url"},
		{"no region", func(c *Config) { c.Region, c.QueueURL = "", "http://127.0.0.1:4100/1/dlq" }, "region"},
		{"no source queue", func(c *Config) { c.SourceQueue = " " }, "source_queue"},
		{"bad endpoint", func(c *Config) { c.Endpoint = "127.0.0.1:4100" }, "endpoint"},
		{"bad protocol", func(c *Config) { c.Protocol = "xml" }, "protocol"},
		{"too many receivers", func(c *Config) { c.Receivers = MaxReceivers + 1 }, "receivers"},
		{"negative receivers", func(c *Config) { c.Receivers = -1 }, "receivers"},
		{"wait above 20s", func(c *Config) { c.WaitTime = 21 * time.Second }, "wait_time"},
		{"wait not whole seconds", func(c *Config) { c.WaitTime = 1500 * time.Millisecond }, "wait_time"},
		{"visibility below 1s", func(c *Config) { c.VisibilityTimeout = time.Millisecond }, "visibility_timeout"},
		{"visibility above 12h", func(c *Config) { c.VisibilityTimeout = 13 * time.Hour }, "visibility_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := base()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if c.Region == "" || c.Receivers != DefaultReceivers || c.WaitTime != DefaultWaitTime ||
					c.VisibilityTimeout != DefaultVisibilityTimeout || (c.Protocol != ProtocolJSON && c.Protocol != ProtocolQuery) {
					t.Fatalf("defaults not filled: %+v", c)
				}
				return
			}
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("Validate: %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
}

func TestConfigFromYAML(t *testing.T) {
	t.Parallel()
	var c Config
	src := `
region: eu-west-1
queue_url: http://127.0.0.1:4100/100010001000/billing-dlq
source_queue: billing
endpoint: http://127.0.0.1:4100
protocol: query
receivers: 2
wait_time: 1s
visibility_timeout: 90s
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Config{Region: "eu-west-1", QueueURL: "http://127.0.0.1:4100/100010001000/billing-dlq", SourceQueue: "billing",
		Endpoint: "http://127.0.0.1:4100", Protocol: ProtocolQuery, Receivers: 2, WaitTime: time.Second, VisibilityTimeout: 90 * time.Second}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

func TestNewSourceRejectsBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := NewSource("x", Config{}, nil); quarantine.ErrorField(err) != "queue_url" {
		t.Fatalf("NewSource: %v, want an error on queue_url", err)
	}
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	api := func(code string, fault smithy.ErrorFault) error {
		return fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault})
	}
	cases := []struct {
		err  error
		code string
	}{
		{api("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient), quarantine.ENOTFOUND},
		{api("QueueDoesNotExist", smithy.FaultClient), quarantine.ENOTFOUND},
		{api("AccessDenied", smithy.FaultClient), quarantine.EFORBIDDEN},
		{api("InvalidClientTokenId", smithy.FaultClient), quarantine.EUNAUTHORIZED},
		{api("RequestThrottled", smithy.FaultClient), quarantine.EUNAVAILABLE},
		{api("InvalidParameterValue", smithy.FaultClient), quarantine.EINVALID},
		{api("InternalError", smithy.FaultServer), quarantine.EUNAVAILABLE},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, quarantine.EUNAVAILABLE},
		{quarantine.Errorf(quarantine.ECONFLICT, "kept"), quarantine.ECONFLICT},
	}
	for _, tc := range cases {
		err := translate("receive", tc.err)
		if quarantine.ErrorCode(err) != tc.code {
			t.Errorf("translate(%v) = %v, want %s", tc.err, err, tc.code)
		}
		if !errors.Is(err, tc.err) && quarantine.ErrorCode(tc.err) == quarantine.EINTERNAL {
			t.Errorf("translate(%v) lost the cause", tc.err)
		}
	}
	if translate("x", nil) != nil {
		t.Error("translate(nil) != nil")
	}
}
