package nats

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

// Defaults of Config.
const (
	// DefaultAckWait is the AckWait of the collector's own consumer: well
	// above the time one batch takes to commit, since a delivery not
	// acknowledged within it is redelivered (harmless, but wasted work).
	DefaultAckWait = 60 * time.Second
	// DefaultReconcileEvery is how often mode (b) looks for messages whose
	// advisory was missed.
	DefaultReconcileEvery = time.Minute
)

// Bounds of the durations in Config.
const (
	MinAckWait        = time.Second
	MaxAckWait        = 12 * time.Hour
	MinReconcileEvery = time.Second
)

// Config is the broker part of one `collectors:` entry of kind nats.
//
// Exactly one of Stream (mode a) and Advisories (mode b) is set.
//
// Mode (a), a failure stream: workers publish canonical failure envelopes
// to subjects of Stream; the collector drains them through its durable pull
// consumer Consumer (default "quarantine-<collector name>"), optionally
// restricted to Subject.
//
// Mode (b), MaxDeliver advisories: the server publishes an advisory when
// the consumer Advisories.Consumer of the stream Advisories.Stream gives up
// on a message; the collector fetches that message by its stream sequence,
// stores it, and deletes it from the stream when DeleteAfterStore is set.
// The advisories are captured in a stream of their own (CaptureStream), so
// that those published while the collector is down are not lost.
type Config struct {
	// URL is the NATS server URL (several may be given, comma separated).
	// It may carry credentials: it is never logged as is (see LogValue).
	URL string `yaml:"url"`

	Stream   string `yaml:"stream,omitempty"`
	Subject  string `yaml:"subject,omitempty"`
	Consumer string `yaml:"consumer,omitempty"`

	Advisories *AdvisoryConfig `yaml:"advisories,omitempty"`
	// DeleteAfterStore deletes the original message from the worker stream
	// once it is stored (mode b).
	DeleteAfterStore bool `yaml:"delete_after_store,omitempty"`

	// AckWait is the AckWait of the collector's consumer (default 60s).
	AckWait time.Duration `yaml:"ack_wait,omitempty"`
	// ReconcileEvery is the period of the reconciliation pass (mode b,
	// default 1m). It also runs at each start.
	ReconcileEvery time.Duration `yaml:"reconcile_every,omitempty"`
}

// AdvisoryConfig names the consumer whose MaxDeliver advisories mode (b)
// follows.
type AdvisoryConfig struct {
	Stream   string `yaml:"stream"`
	Consumer string `yaml:"consumer"`
	// CaptureStream is the stream that keeps the advisories until the
	// collector has handled them; default "QUARANTINE_ADV_<stream>_<consumer>".
	CaptureStream string `yaml:"capture_stream,omitempty"`
}

// AdvisoryMode reports whether c is mode (b).
func (c *Config) AdvisoryMode() bool { return c.Advisories != nil }

// Validate checks c. Errors are EINVALID *quarantine.Error values whose
// Field is the YAML key at fault ("url", "stream", "advisories.consumer",
// …).
func (c *Config) Validate() error {
	if err := validateURL(c.URL); err != nil {
		return err
	}
	switch {
	case c.Stream == "" && c.Advisories == nil:
		return quarantine.FieldErrorf(quarantine.EINVALID, "stream",
			"set stream (a failure stream of envelopes) or advisories (MaxDeliver advisories of a worker consumer)")
	case c.Stream != "" && c.Advisories != nil:
		return quarantine.FieldErrorf(quarantine.EINVALID, "advisories", "set either stream or advisories, not both")
	}
	if c.Consumer != "" {
		if err := validateName("consumer", "consumer", c.Consumer); err != nil {
			return err
		}
	}
	if c.Advisories == nil {
		if err := validateName("stream", "stream", c.Stream); err != nil {
			return err
		}
		if c.Subject != "" && !validSubject(c.Subject) {
			return quarantine.FieldErrorf(quarantine.EINVALID, "subject", "%q is not a NATS subject filter", quarantine.Clip(c.Subject))
		}
		if c.DeleteAfterStore {
			return quarantine.FieldErrorf(quarantine.EINVALID, "delete_after_store", "delete_after_store applies to advisories only")
		}
		if c.ReconcileEvery != 0 {
			return quarantine.FieldErrorf(quarantine.EINVALID, "reconcile_every", "reconcile_every applies to advisories only")
		}
	} else {
		a := c.Advisories
		if c.Subject != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "subject", "subject applies to a failure stream only")
		}
		if err := validateName("advisories.stream", "stream", a.Stream); err != nil {
			return err
		}
		if err := validateName("advisories.consumer", "consumer", a.Consumer); err != nil {
			return err
		}
		if a.CaptureStream != "" {
			if err := validateName("advisories.capture_stream", "stream", a.CaptureStream); err != nil {
				return err
			}
			if a.CaptureStream == a.Stream {
				return quarantine.FieldErrorf(quarantine.EINVALID, "advisories.capture_stream", "the capture stream must not be the worker stream")
			}
		}
		if c.ReconcileEvery != 0 && c.ReconcileEvery < MinReconcileEvery {
			return quarantine.FieldErrorf(quarantine.EINVALID, "reconcile_every", "reconcile_every must be at least %s", MinReconcileEvery)
		}
	}
	if c.AckWait != 0 && (c.AckWait < MinAckWait || c.AckWait > MaxAckWait) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "ack_wait", "ack_wait must be between %s and %s, like 60s", MinAckWait, MaxAckWait)
	}
	return nil
}

// withDefaults returns c with the defaults of the collector named name.
func (c Config) withDefaults(name string) Config {
	if c.Consumer == "" {
		c.Consumer = "quarantine-" + safeName(name)
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.Advisories != nil {
		a := *c.Advisories
		if a.CaptureStream == "" {
			a.CaptureStream = captureStreamName(a.Stream, a.Consumer)
		}
		c.Advisories = &a
		if c.ReconcileEvery == 0 {
			c.ReconcileEvery = DefaultReconcileEvery
		}
	}
	return c
}

// captureStreamName is the default capture stream of the advisories of
// stream/consumer: QUARANTINE_ADV_<stream>_<consumer>, or a hash of both
// when that is too long for a stream name.
func captureStreamName(stream, consumer string) string {
	n := "QUARANTINE_ADV_" + stream + "_" + consumer
	if len(n) <= 255 {
		return n
	}
	sum := sha256.Sum256([]byte(stream + "\x00" + consumer))
	return "QUARANTINE_ADV_" + hex.EncodeToString(sum[:16])
}

// LogValue shows c without the credentials its URL may hold.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("url", redacturl.List(c.URL))}
	if c.Advisories != nil {
		attrs = append(attrs, slog.String("advisories.stream", c.Advisories.Stream),
			slog.String("advisories.consumer", c.Advisories.Consumer),
			slog.String("advisories.capture_stream", c.Advisories.CaptureStream),
			slog.Bool("delete_after_store", c.DeleteAfterStore),
			slog.Duration("reconcile_every", c.ReconcileEvery))
	} else {
		attrs = append(attrs, slog.String("stream", c.Stream), slog.String("subject", c.Subject))
	}
	attrs = append(attrs, slog.String("consumer", c.Consumer), slog.Duration("ack_wait", c.AckWait))
	return slog.GroupValue(attrs...)
}

// RedactURL returns the server list u with every password or token
// replaced by "<secret>".

func validateURL(u string) error {
	if strings.TrimSpace(u) == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "url is required, like nats://127.0.0.1:4222")
	}
	for _, p := range strings.Split(u, ",") {
		pu, err := url.Parse(strings.TrimSpace(p))
		if err != nil || pu.Host == "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "url", "%q is not a server URL, like nats://127.0.0.1:4222", redacturl.List(p))
		}
		switch pu.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return quarantine.FieldErrorf(quarantine.EINVALID, "url", "scheme %q is not one of nats, tls, ws, wss", quarantine.Clip(pu.Scheme))
		}
	}
	return nil
}

// validateName checks a stream or consumer name as the server does: not
// empty, at most 255 bytes, printable, without whitespace, '.', '*', '>',
// or path separators.
func validateName(field, what, s string) error {
	if s == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "a %s name is required", what)
	}
	if len(s) > 255 || strings.ContainsAny(s, ".*>/\\") || strings.IndexFunc(s, badNameRune) >= 0 {
		return quarantine.FieldErrorf(quarantine.EINVALID, field,
			"%q is not a valid %s name (no whitespace, '.', '*', '>', '/' or '\\', at most 255 bytes)", quarantine.Clip(s), what)
	}
	return nil
}

func badNameRune(r rune) bool { return r <= ' ' || r == 0x7f || r == 0xfffd }

// safeName turns a collector name into a valid consumer name.
func safeName(s string) string {
	b := []rune(s)
	for i, r := range b {
		if badNameRune(r) || strings.ContainsRune(".*>/\\", r) {
			b[i] = '_'
		}
	}
	out := string(b)
	if len(out) > 200 {
		out = quarantine.SanitizeText(out[:200])
	}
	return out
}

// validSubject checks a subject filter: dot-separated non-empty tokens
// without whitespace, '*' alone in its token, '>' alone and last.
func validSubject(s string) bool {
	if s == "" || len(s) > 4096 {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return false
		case strings.IndexFunc(t, badNameRune) >= 0:
			return false
		case t == ">" && i != len(toks)-1:
			return false
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}

// subjectMatches reports whether subject matches the filter (with * and >
// wildcards).
func subjectMatches(filter, subject string) bool {
	f := strings.Split(filter, ".")
	s := strings.Split(subject, ".")
	for i, t := range f {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || (t != "*" && t != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}
