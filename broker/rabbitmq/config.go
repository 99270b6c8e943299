package rabbitmq

import (
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

// maxNameBytes is the longest queue name AMQP 0-9-1 allows (a shortstr).
const maxNameBytes = 255

// Config is one RabbitMQ collector: the keys of a `collectors:` entry of
// kind rabbitmq besides name, kind, batch_size and linger.
//
// URL is a secret (it usually carries a password): String, GoString and
// LogValue print it with the password replaced, and no error of this
// package quotes it unredacted.
type Config struct {
	// URL is the broker, amqp://USER:PASS@HOST:PORT/VHOST (or amqps://).
	URL string `yaml:"url"`
	// Queue is the failure queue to drain.
	Queue string `yaml:"queue"`
	// Prefetch is the channel's basic.qos prefetch count; 0 means what the
	// collector holds at most: (commits + 1) × batch_size.
	Prefetch int `yaml:"prefetch"`
	// Declare creates Queue (durable, classic, no arguments) when it does
	// not exist. By default the queue is only checked (passively declared)
	// and a missing queue is reported.
	Declare bool `yaml:"declare"`
	// SourceQueue, when set, is the queue every collected message is
	// recorded under (its replay destination), whatever x-death says.
	SourceQueue string `yaml:"source_queue"`
}

// Validate checks c. Errors are EINVALID and name the key (Field "url",
// "queue", "prefetch" or "source_queue"); the URL's password never appears.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.URL) == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "a RabbitMQ collector needs url: amqp://USER:PASS@HOST:5672/")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "the url is not a valid amqp:// URL")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "%q: the scheme must be amqp or amqps", redacturl.URL(c.URL))
	}
	if u.Host == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "%q has no host", redacturl.URL(c.URL))
	}
	if err := checkName("queue", c.Queue, true); err != nil {
		return err
	}
	if err := checkName("source_queue", c.SourceQueue, false); err != nil {
		return err
	}
	if c.Prefetch < 0 || c.Prefetch > math.MaxUint16 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "prefetch", "prefetch must be between 0 ((commits + 1) × batch_size) and %d, got %d", math.MaxUint16, c.Prefetch)
	}
	return nil
}

func checkName(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s is required: the failure queue to drain", field)
	case len(v) > maxNameBytes:
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s is longer than %d bytes", field, maxNameBytes)
	case v != quarantine.SanitizeText(v):
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s must be valid UTF-8 without NUL", field)
	}
	return nil
}

// String describes c with the URL's password redacted.
func (c Config) String() string {
	return fmt.Sprintf("rabbitmq{url: %s, queue: %q, prefetch: %d, declare: %t, source_queue: %q}",
		redacturl.URL(c.URL), c.Queue, c.Prefetch, c.Declare, c.SourceQueue)
}

// GoString is String, so that %#v does not print the password either.
func (c Config) GoString() string { return c.String() }

// LogValue logs c with the URL's password redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redacturl.URL(c.URL)),
		slog.String("queue", c.Queue),
		slog.Int("prefetch", c.Prefetch),
		slog.Bool("declare", c.Declare),
		slog.String("source_queue", c.SourceQueue),
	)
}

// redactURL returns raw with any password replaced, fit for logs. An
// unparsable URL is not shown at all, since it may hold a password where
// the parser cannot find it.
