package sqs

import (
	"net/url"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/defaults"
)

// Protocols a Config may name.
const (
	ProtocolJSON  = "json"  // AWS JSON 1.0, what real SQS speaks today (the default)
	ProtocolQuery = "query" // the older query protocol, the only one goaws speaks
)

// Defaults and bounds of Config.
const (
	DefaultReceivers         = 4
	MaxReceivers             = 64
	DefaultWaitTime          = 20 * time.Second
	MaxWaitTime              = 20 * time.Second // SQS's long-poll ceiling
	DefaultVisibilityTimeout = 60 * time.Second
	MaxVisibilityTimeout     = 12 * time.Hour // SQS's ceiling
)

// Config is one SQS collector: the keys of a `collectors:` entry of kind
// sqs besides name, kind, batch_size and linger.
//
//	collectors:
//	  - name: billing-sqs
//	    kind: sqs
//	    region: us-east-1
//	    queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/billing-dlq
//	    source_queue: billing            # the queue the jobs were meant for
//	    receivers: 4                     # parallel long polls
//	    wait_time: 20s                   # long-poll wait, at most 20s
//	    visibility_timeout: 60s          # renewed while a batch is held
//	    endpoint: http://127.0.0.1:4100  # emulators only
//	    protocol: query                  # goaws only
type Config struct {
	// Region is the AWS region. When empty it is taken from a queue URL
	// of the form https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.
	Region string `yaml:"region"`
	// QueueURL is the dead-letter queue the collector drains.
	QueueURL string `yaml:"queue_url"`
	// SourceQueue is the queue the jobs were meant for: the message's
	// Queue and default replay destination. Required, because a message
	// moved by SQS redrive does not say where it came from.
	SourceQueue string `yaml:"source_queue"`
	// Endpoint overrides the service endpoint (emulators such as goaws).
	// With an endpoint and no AWS_ACCESS_KEY_ID in the environment, static
	// dummy credentials are used.
	Endpoint string `yaml:"endpoint"`
	// Protocol is ProtocolJSON (default) or ProtocolQuery (goaws).
	Protocol string `yaml:"protocol"`
	// Receivers is the number of parallel long-polling receivers (default
	// DefaultReceivers), each asking for 10 messages per call.
	Receivers int `yaml:"receivers"`
	// WaitTime is the long-poll wait of each ReceiveMessage, in whole
	// seconds up to 20s (default DefaultWaitTime).
	WaitTime time.Duration `yaml:"wait_time"`
	// VisibilityTimeout is asked for on every receive and renewed while a
	// batch is held, in whole seconds (default DefaultVisibilityTimeout).
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`
}

// Validate fills the defaults of unset fields in place, then checks c. It
// returns an EINVALID *quarantine.Error whose Field is the YAML key.
func (c *Config) Validate() error {
	c.Protocol = strings.ToLower(strings.TrimSpace(c.Protocol))
	defaults.Zero(&c.Protocol, ProtocolJSON)
	defaults.Zero(&c.Receivers, DefaultReceivers)
	defaults.Zero(&c.WaitTime, DefaultWaitTime)
	defaults.Zero(&c.VisibilityTimeout, DefaultVisibilityTimeout)

	u, err := httpURL(c.QueueURL)
	switch {
	case c.QueueURL == "":
		return invalid("queue_url", "queue_url is required: the URL of the dead-letter queue to drain")
	case err != nil:
		return invalid("queue_url", "queue_url %q is not an http(s) URL", c.QueueURL)
	case strings.Trim(u.Path, "/") == "":
		return invalid("queue_url", "queue_url %q has no queue in its path (e.g. /123456789012/billing-dlq)", c.QueueURL)
	}
	if c.Region == "" {
		c.Region = regionOf(u.Host)
	}
	if c.Region == "" {
		return invalid("region", "region is required (e.g. us-east-1)")
	}
	if strings.TrimSpace(c.SourceQueue) == "" {
		return invalid("source_queue", "source_queue is required: the queue the dead letters were meant for (their replay destination)")
	}
	if c.Endpoint != "" {
		if _, err := httpURL(c.Endpoint); err != nil {
			return invalid("endpoint", "endpoint %q is not an http(s) URL", c.Endpoint)
		}
	}
	if c.Protocol != ProtocolJSON && c.Protocol != ProtocolQuery {
		return invalid("protocol", "protocol must be %q or %q, got %q", ProtocolJSON, ProtocolQuery, c.Protocol)
	}
	if c.Receivers < 1 || c.Receivers > MaxReceivers {
		return invalid("receivers", "receivers must be between 1 and %d, got %d", MaxReceivers, c.Receivers)
	}
	if c.WaitTime < time.Second || c.WaitTime > MaxWaitTime || c.WaitTime%time.Second != 0 {
		return invalid("wait_time", "wait_time must be whole seconds between 1s and %s, got %s", MaxWaitTime, c.WaitTime)
	}
	if c.VisibilityTimeout < time.Second || c.VisibilityTimeout > MaxVisibilityTimeout || c.VisibilityTimeout%time.Second != 0 {
		return invalid("visibility_timeout", "visibility_timeout must be whole seconds between 1s and %s, got %s", MaxVisibilityTimeout, c.VisibilityTimeout)
	}
	return nil
}

func invalid(field, format string, args ...any) error {
	return quarantine.FieldErrorf(quarantine.EINVALID, field, format, args...)
}

func httpURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, quarantine.Errorf(quarantine.EINVALID, "not an http(s) URL")
	}
	return u, nil
}

// regionOf returns REGION from a host sqs.REGION.amazonaws.com (or
// .amazonaws.com.cn), or "".
func regionOf(host string) string {
	parts := strings.Split(strings.ToLower(host), ".")
	if len(parts) >= 4 && parts[0] == "sqs" && parts[2] == "amazonaws" {
		return parts[1]
	}
	return ""
}
