package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/quarantine-dev/quarantine"
)

// DefaultGroup is the consumer group of a collector that names none.
const DefaultGroup = "quarantine"

// maxTopicBytes is the longest topic name Kafka accepts.
const maxTopicBytes = 249

// Config is the broker part of one `collectors:` entry of kind kafka.
//
// The collector drains Topics (the dead-letter topics) through the
// consumer group Group, committing offsets only once the store committed
// the records. Replays are produced to the original topic on the same
// cluster.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// Topics are the dead-letter topics to drain.
	Topics []string `yaml:"topics"`
	// Group is the consumer group (default "quarantine"). A new group
	// starts at the earliest offset: no dead letter already in the topic
	// is skipped.
	Group string `yaml:"group,omitempty"`
	// SourceTopic is the queue given to a record that names no original
	// topic (a raw record, an envelope without job.queue). Without it such
	// a record is stored without a queue, and a replay of it needs an
	// explicit destination: it never goes back to the dead-letter topic.
	SourceTopic string `yaml:"source_topic,omitempty"`
	// ClientID names the client to the brokers (default
	// "quarantine-<collector name>").
	ClientID string `yaml:"client_id,omitempty"`
	// SessionTimeout is the group session timeout (default 45s): how long
	// the group waits for a member that stopped heartbeating (a crashed
	// collector) before its partitions go to the others. The broker bounds
	// it (group.min/max.session.timeout.ms).
	SessionTimeout time.Duration `yaml:"session_timeout,omitempty"`
	// InstanceID, when set, makes the collector a static member of the
	// group (KIP-345, group.instance.id): restarted with the same id, even
	// after a kill -9, it takes its partitions back at once instead of
	// after the session timeout. Every serve instance of the group needs
	// its own (a member joining with an id in use replaces, and fences,
	// the member that had it). A static member
	// does not leave the group when it stops: the partitions of an
	// instance stopped for good wait session_timeout before they move.
	// Letters, digits, '.', '_' and '-', at most 249 bytes, like a topic.
	InstanceID *string `yaml:"instance_id,omitempty"`
	// InstanceIDEnv names an environment variable holding the instance
	// id, read when the collector starts, for one configuration shared by
	// several serve instances (the Helm chart's ConfigMap), each with an
	// id of its own that outlives its restarts: a StatefulSet's pod name,
	// which the chart puts in POD_NAME. The variable must be set and hold
	// a valid id. It excludes instance_id.
	InstanceIDEnv string `yaml:"instance_id_env,omitempty"`

	TLS  *TLSConfig  `yaml:"tls,omitempty"`
	SASL *SASLConfig `yaml:"sasl,omitempty"`
}

// TLSConfig turns TLS on. Every field is optional: an empty tls: {}
// uses the system's roots.
type TLSConfig struct {
	CAFile             string `yaml:"ca_file,omitempty"`
	CertFile           string `yaml:"cert_file,omitempty"`
	KeyFile            string `yaml:"key_file,omitempty"`
	ServerName         string `yaml:"server_name,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify,omitempty"`
}

// SASLConfig authenticates the client: mechanism PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512, with a username and exactly one of password and
// password_file (whose content, less a final newline, is the password).
type SASLConfig struct {
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username"`
	Password     string `yaml:"password,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
}

// SASL mechanisms.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Validate checks c. Errors are EINVALID *quarantine.Error values whose
// Field is the YAML key at fault ("brokers[0]", "topics", "sasl.mechanism", …).
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "brokers", "brokers is required, like [127.0.0.1:9092]")
	}
	for i, b := range c.Brokers {
		if err := validateBroker(b); err != nil {
			return quarantine.FieldErrorf(quarantine.EINVALID, fmt.Sprintf("brokers[%d]", i), "%s", err)
		}
	}
	if len(c.Topics) == 0 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "topics", "topics is required: the dead-letter topics to drain")
	}
	seen := map[string]bool{}
	for i, t := range c.Topics {
		if p := TopicProblem(t); p != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, fmt.Sprintf("topics[%d]", i), "%q %s", quarantine.Clip(t), p)
		}
		if seen[t] {
			return quarantine.FieldErrorf(quarantine.EINVALID, fmt.Sprintf("topics[%d]", i), "topic %q is listed twice", t)
		}
		seen[t] = true
	}
	if c.Group != "" && (len(c.Group) > 255 || strings.IndexFunc(c.Group, badRune) >= 0) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "group", "%q is not a usable group name (printable, at most 255 bytes)", quarantine.Clip(c.Group))
	}
	if c.SourceTopic != "" {
		if p := TopicProblem(c.SourceTopic); p != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "source_topic", "%q %s", quarantine.Clip(c.SourceTopic), p)
		}
		if seen[c.SourceTopic] {
			return quarantine.FieldErrorf(quarantine.EINVALID, "source_topic", "the source topic must not be one of the dead-letter topics")
		}
	}
	if c.ClientID != "" && (len(c.ClientID) > 255 || strings.IndexFunc(c.ClientID, badRune) >= 0) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "client_id", "%q is not a usable client id", quarantine.Clip(c.ClientID))
	}
	if c.SessionTimeout != 0 && (c.SessionTimeout < time.Second || c.SessionTimeout > 30*time.Minute) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "session_timeout", "session_timeout must be between 1s and 30m, like 45s")
	}
	if c.InstanceID != nil {
		if p := instanceIDProblem(*c.InstanceID); p != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "instance_id", "instance_id %q %s", quarantine.Clip(*c.InstanceID), p)
		}
	}
	if c.InstanceIDEnv != "" {
		if c.InstanceID != nil {
			return quarantine.FieldErrorf(quarantine.EINVALID, "instance_id_env", "set instance_id or instance_id_env, not both")
		}
		if !envName.MatchString(c.InstanceIDEnv) {
			return quarantine.FieldErrorf(quarantine.EINVALID, "instance_id_env", "%q is not an environment variable name (letters, digits and '_', not starting with a digit), like POD_NAME", quarantine.Clip(c.InstanceIDEnv))
		}
	}
	if t := c.TLS; t != nil {
		if (t.CertFile == "") != (t.KeyFile == "") {
			return quarantine.FieldErrorf(quarantine.EINVALID, "tls.cert_file", "set both cert_file and key_file, or neither")
		}
	}
	if s := c.SASL; s != nil {
		switch strings.ToUpper(s.Mechanism) {
		case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		default:
			return quarantine.FieldErrorf(quarantine.EINVALID, "sasl.mechanism", "mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", quarantine.Clip(s.Mechanism))
		}
		if s.Username == "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "sasl.username", "a username is required")
		}
		if (s.Password == "") == (s.PasswordFile == "") {
			return quarantine.FieldErrorf(quarantine.EINVALID, "sasl.password", "set exactly one of password and password_file")
		}
	}
	return nil
}

// TopicProblem says why t cannot name a Kafka topic (empty, longer than
// 249 bytes, "." or "..", a character outside [a-zA-Z0-9._-]), or "".
func TopicProblem(t string) string {
	switch {
	case t == "":
		return "is empty: a topic name is required"
	case len(t) > maxTopicBytes:
		return fmt.Sprintf("is longer than %d bytes", maxTopicBytes)
	case t == "." || t == "..":
		return "is not a valid topic name"
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "is not a valid topic name (letters, digits, '.', '_' and '-' only)"
		}
	}
	return ""
}

// instanceIDProblem says why id cannot be a group.instance.id (Kafka
// checks it as it checks a topic name), or "".
func instanceIDProblem(id string) string {
	if id == "" {
		return "is empty: give each serve instance its own non-empty id, like quarantine-1, or remove the key"
	}
	if p := TopicProblem(id); p != "" {
		return strings.Replace(p, "topic name", "group instance id", 1)
	}
	return ""
}

// envName is the shape of an environment variable's name (POSIX, as a
// shell takes it).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// withInstanceID returns c with InstanceID read from the environment
// variable InstanceIDEnv names, when it names one (lookup is
// os.LookupEnv but in tests). Errors are EINVALID on instance_id_env: the
// variable is not set, or holds no valid id.
func (c Config) withInstanceID(lookup func(string) (string, bool)) (Config, error) {
	if c.InstanceIDEnv == "" {
		return c, nil
	}
	id, ok := lookup(c.InstanceIDEnv)
	if !ok {
		return c, quarantine.FieldErrorf(quarantine.EINVALID, "instance_id_env", "the environment variable %s is not set: it holds this instance's group instance id", c.InstanceIDEnv)
	}
	if p := instanceIDProblem(id); p != "" {
		return c, quarantine.FieldErrorf(quarantine.EINVALID, "instance_id_env", "the environment variable %s holds %q, which %s", c.InstanceIDEnv, quarantine.Clip(id), p)
	}
	c.InstanceID = &id
	return c, nil
}

// groupOpts are the group membership options of a consumer: static
// membership with instanceID (when not ""), and the session timeout
// (when not 0) with a rebalance timeout of at least as much.
func groupOpts(instanceID string, session time.Duration) []kgo.Opt {
	var opts []kgo.Opt
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	if session > 0 {
		opts = append(opts, kgo.SessionTimeout(session), kgo.RebalanceTimeout(max(session, 10*time.Second)))
	}
	return opts
}

func validateBroker(b string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(b))
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port, like 127.0.0.1:9092", quarantine.Clip(b))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q has no valid port", quarantine.Clip(b))
	}
	return nil
}

func badRune(r rune) bool { return r < ' ' || r == 0x7f || r == 0xfffd }

// withDefaults returns c with the defaults of the collector named name.
func (c Config) withDefaults(name string) Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.ClientID == "" {
		c.ClientID = "quarantine-" + safeName(name)
	}
	return c
}

// safeName keeps the characters of s that a client id takes.
func safeName(s string) string {
	b := []rune(s)
	for i, r := range b {
		if badRune(r) || r == ' ' {
			b[i] = '_'
		}
	}
	out := string(b)
	if len(out) > 200 {
		out = quarantine.SanitizeText(out[:200])
	}
	return out
}

// LogValue shows c without its password.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("brokers", strings.Join(c.Brokers, ",")),
		slog.String("topics", strings.Join(c.Topics, ",")),
		slog.String("group", c.Group),
		slog.Bool("tls", c.TLS != nil),
	}
	if c.InstanceID != nil {
		attrs = append(attrs, slog.String("instance_id", *c.InstanceID))
	}
	if c.SASL != nil {
		attrs = append(attrs, slog.String("sasl.mechanism", c.SASL.Mechanism), slog.String("sasl.username", c.SASL.Username))
	}
	return slog.GroupValue(attrs...)
}

// connOpts are the client options every client of c shares: seeds,
// client id, TLS and SASL. Errors (EINVALID, naming the key) are files
// that cannot be read.
func (c Config) connOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.TLS != nil {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL != nil {
		m, err := c.SASL.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (t *TLSConfig) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, for test clusters
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &quarantine.Error{Code: quarantine.EINVALID, Field: "tls.ca_file", Err: err, Message: "kafka: cannot read the CA file"}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "tls.ca_file", "the CA file holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &quarantine.Error{Code: quarantine.EINVALID, Field: "tls.cert_file", Err: err, Message: "kafka: cannot load the client certificate"}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (s *SASLConfig) mechanism() (sasl.Mechanism, error) {
	pw := s.Password
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return nil, &quarantine.Error{Code: quarantine.EINVALID, Field: "sasl.password_file", Err: err, Message: "kafka: cannot read the password file"}
		}
		pw = strings.TrimRight(string(b), "\r\n")
	}
	switch strings.ToUpper(s.Mechanism) {
	case MechanismPlain:
		return plain.Auth{User: s.Username, Pass: pw}.AsMechanism(), nil
	case MechanismSCRAMSHA256:
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			return scram.Auth{User: s.Username, Pass: pw}, nil
		}), nil
	default:
		return scram.Sha512(func(context.Context) (scram.Auth, error) {
			return scram.Auth{User: s.Username, Pass: pw}, nil
		}), nil
	}
}
