package main

import (
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/clientip"
	"github.com/quarantine-dev/quarantine/internal/rules"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
)

// Environment variables read by the configuration.
const (
	EnvConfig    = "QUARANTINE_CONFIG"       // path of the YAML file
	EnvDatabase  = "QUARANTINE_DATABASE_URL" // overrides database
	EnvListen    = "QUARANTINE_LISTEN"       // overrides listen
	EnvPublicURL = "QUARANTINE_PUBLIC_URL"   // overrides public_url

	EnvTLSCertFile = "QUARANTINE_TLS_CERT_FILE"         // overrides tls.cert_file
	EnvTLSKeyFile  = "QUARANTINE_TLS_KEY_FILE"          // overrides tls.key_file
	EnvRuntimeRole = "QUARANTINE_DATABASE_RUNTIME_ROLE" // overrides database_runtime_role
)

// Defaults of the configuration.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultMaxBodyBytes    = 10 << 20 // 10 MiB
	DefaultMaxPayloadBytes = 1 << 20  // 1 MiB
	maxBodyBytesCeiling    = 1 << 30  // 1 GiB: anything above is a typo

	DefaultRetention      = 720 * time.Hour // 30 days, for replayed and discarded payloads
	DefaultRetentionEvery = time.Hour
	minRetentionEvery     = time.Second
)

// Config is the service's configuration, resolved from defaults, the YAML
// file, the environment and the flags, in that order of precedence
// (flags win). It is passed down; there is no global configuration.
type Config struct {
	Listen   string      // host:port to serve HTTP on
	Database DatabaseURL // sqlite:PATH or postgres://…
	// PublicURL is the UI's base URL as its users reach it (config
	// public_url): alarm notifications link there ("": the listen
	// address's URL). RunbookURL is the runbook they link to ("":
	// alert.DefaultRunbookURL).
	PublicURL  string
	RunbookURL string
	// DatabaseRuntimeRole is the PostgreSQL role serve runs as, apart
	// from the owner of the tables that runs migrate: migrate grants it
	// exactly what serve needs (config database_runtime_role).
	DatabaseRuntimeRole string
	// TLS, when set, makes serve speak HTTPS only (config tls:).
	TLS    TLSConfig
	Owners []quarantine.OwnerRule // first match wins, glob on queue
	Limits Limits
	Log    LogConfig
	// Idempotency says where each queue's idempotency key lives.
	Idempotency []collect.IdempotencyRule
	// RedactHeaders are replaced at ingest (default Authorization, Cookie).
	RedactHeaders []string
	// RedactPointers are JSON Pointers into payloads whose values viewers
	// see as "<redacted>" on the API (config redact.json_pointers).
	RedactPointers []string
	// Schemas holds, by job name, the compiled JSON Schema an edited
	// payload of that job must satisfy (config schemas: {job: file}).
	Schemas map[string]*rules.Schema
	// Retention says when replayed and discarded messages lose their
	// payloads.
	Retention RetentionConfig
	// Collectors drain the brokers' failure queues.
	Collectors []CollectorConfig
	// Replay holds the defaults of new replay batches and the engine's
	// settings; Destinations override where some queues' replays go.
	Replay       ReplayConfig
	Destinations []DestinationConfig
	// Bulk is the confirmation of bulk actions (config bulk:).
	Bulk BulkConfig
	// Alarms are the age alarms and their receivers (config alarms:).
	Alarms AlarmsConfig
	// Metrics protects /metrics (config metrics:).
	Metrics MetricsConfig
	// TrustedProxies are the reverse proxies (config trusted_proxies:,
	// CIDRs) whose X-Forwarded-For names the client, for the refused
	// login budget and audit, and whose X-Forwarded-Proto: https makes
	// the web UI's cookies Secure. None by default.
	TrustedProxies clientip.Proxies
	// Auth says how people sign in to the web UI (config auth:).
	Auth AuthConfig
}

// Limits bound what the API accepts.
type Limits struct {
	MaxBodyBytes    int64 // a larger request body is refused (413)
	MaxPayloadBytes int   // a larger payload is stored raw and flagged
}

// LogConfig selects the log level and format (text or json) on stderr.
type LogConfig struct {
	Level  slog.Level
	Format string
}

// Overrides are the command-line flags that take precedence over the file
// and the environment. Empty fields override nothing.
type Overrides struct {
	Listen      string
	Database    string
	TLSCertFile string
	TLSKeyFile  string
	RuntimeRole string
}

// DefaultConfig returns the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		Listen:   DefaultListen,
		Database: DatabaseURL(storeopen.DefaultURL),
		Owners:   []quarantine.OwnerRule{},
		Limits:   Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxPayloadBytes: DefaultMaxPayloadBytes},
		Log:      LogConfig{Level: slog.LevelInfo, Format: "text"},

		Idempotency:    []collect.IdempotencyRule{},
		RedactHeaders:  collect.DefaultRedactHeaders,
		RedactPointers: []string{},
		Schemas:        map[string]*rules.Schema{},
		Retention:      RetentionConfig{Replayed: DefaultRetention, Discarded: DefaultRetention, Every: DefaultRetentionEvery},
		Collectors:     []CollectorConfig{},
		Replay:         defaultReplayConfig(),
		Bulk:           defaultBulkConfig(),
		Destinations:   []DestinationConfig{},
		Alarms:         defaultAlarmsConfig(),
		Auth:           defaultAuthConfig(),
	}
}

// LoadConfig resolves the configuration from the defaults, the YAML file
// at path (or at $QUARANTINE_CONFIG when path is empty; no file at all is
// fine), then QUARANTINE_DATABASE_URL and QUARANTINE_LISTEN read through
// env. It does no other I/O than reading the file and the JSON Schema
// files it names (compiled here, so that a bad one stops the start).
// Errors are EINVALID,
// name the key (Field) and say where it was set: "FILE:LINE: key: problem"
// for the file, the variable's name for the environment.
func LoadConfig(path string, env func(string) string) (Config, error) {
	return ResolveConfig(path, env, Overrides{})
}

// ResolveConfig is LoadConfig with the flags' overrides applied last.
func ResolveConfig(path string, env func(string) string, o Overrides) (Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	c := DefaultConfig()
	src := &configSource{origin: map[string]string{}}
	if path == "" {
		path = env(EnvConfig)
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, &quarantine.Error{Code: quarantine.EINVALID, Field: "config",
				Message: fmt.Sprintf("cannot read the config file %q", path), Err: err}
		}
		if err := src.decode(path, data, &c); err != nil {
			return Config{}, err
		}
	}
	set := map[string]func(string){
		"listen":                func(v string) { c.Listen = v },
		"database":              func(v string) { c.Database = DatabaseURL(v) },
		"tls.cert_file":         func(v string) { c.TLS.CertFile = v },
		"tls.key_file":          func(v string) { c.TLS.KeyFile = v },
		"database_runtime_role": func(v string) { c.DatabaseRuntimeRole = v },
		"public_url":            func(v string) { c.PublicURL = v },
	}
	for _, s := range []struct{ key, value, origin string }{
		{"listen", env(EnvListen), EnvListen},
		{"database", env(EnvDatabase), EnvDatabase},
		{"tls.cert_file", env(EnvTLSCertFile), EnvTLSCertFile},
		{"tls.key_file", env(EnvTLSKeyFile), EnvTLSKeyFile},
		{"database_runtime_role", env(EnvRuntimeRole), EnvRuntimeRole},
		{"public_url", env(EnvPublicURL), EnvPublicURL},
		{"listen", o.Listen, "--listen"},
		{"database", o.Database, "--database"},
		{"tls.cert_file", o.TLSCertFile, "--tls-cert-file"},
		{"tls.key_file", o.TLSKeyFile, "--tls-key-file"},
		{"database_runtime_role", o.RuntimeRole, "--runtime-role"},
	} {
		if s.value == "" {
			continue
		}
		src.origin[s.key] = s.origin
		set[s.key](s.value)
	}
	if err := src.bulkFromEnv(env, &c.Bulk); err != nil {
		return Config{}, err
	}
	if err := c.validate(src); err != nil {
		return Config{}, err
	}
	return c, nil
}

// fileConfig is the YAML file's shape. Every key the service supports is
// here; decoding is strict, so any other key is an error.
type fileConfig struct {
	Listen     string      `yaml:"listen"`
	Database   string      `yaml:"database"`
	PublicURL  string      `yaml:"public_url"`
	RunbookURL string      `yaml:"runbook_url"`
	Owners     []fileOwner `yaml:"owners"`

	DatabaseRuntimeRole string     `yaml:"database_runtime_role"`
	TLS                 fileTLS    `yaml:"tls"`
	Limits              fileLimits `yaml:"limits"`
	Log                 fileLog    `yaml:"log"`

	Idempotency  []collect.IdempotencyRule `yaml:"idempotency"`
	Redact       fileRedact                `yaml:"redact"`
	Schemas      map[string]string         `yaml:"schemas"`
	Retention    fileRetention             `yaml:"retention"`
	Collectors   []map[string]any          `yaml:"collectors"`
	Replay       fileReplay                `yaml:"replay"`
	Bulk         fileBulk                  `yaml:"bulk"`
	Destinations []DestinationConfig       `yaml:"destinations"`
	Alarms       []fileAlarm               `yaml:"alarms"`
	Metrics      fileMetrics               `yaml:"metrics"`
	Auth         fileAuth                  `yaml:"auth"`

	TrustedProxies []string `yaml:"trusted_proxies"`
}

type fileTLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

type fileRedact struct {
	Headers      *[]string `yaml:"headers"`
	JSONPointers *[]string `yaml:"json_pointers"`
}

type fileRetention struct {
	Replayed  any `yaml:"replayed"`
	Discarded any `yaml:"discarded"`
	Every     any `yaml:"every"`
}

type fileOwner struct {
	Team   string   `yaml:"team"`
	Queues []string `yaml:"queues"`
}

type fileLimits struct {
	MaxBodyBytes    any `yaml:"max_body_bytes"`
	MaxPayloadBytes any `yaml:"max_payload_bytes"`
}

type fileLog struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// decode reads the file into c; values it leaves empty keep their default.
func (s *configSource) decode(file string, data []byte, c *Config) error {
	s.file = file
	s.parse(data)
	var f fileConfig
	if err := yaml.UnmarshalWithOptions(data, &f, yaml.Strict()); err != nil {
		return s.yamlError(err)
	}
	if f.Listen != "" {
		c.Listen = f.Listen
	}
	if f.Database != "" {
		c.Database = DatabaseURL(f.Database)
	}
	c.PublicURL, c.RunbookURL = f.PublicURL, f.RunbookURL
	if f.DatabaseRuntimeRole != "" {
		c.DatabaseRuntimeRole = f.DatabaseRuntimeRole
	}
	if f.TLS.CertFile != "" {
		c.TLS.CertFile = f.TLS.CertFile
	}
	if f.TLS.KeyFile != "" {
		c.TLS.KeyFile = f.TLS.KeyFile
	}
	for _, o := range f.Owners {
		c.Owners = append(c.Owners, quarantine.OwnerRule{Team: o.Team, Queues: o.Queues})
	}
	for _, l := range []struct {
		key string
		v   any
		set func(int64)
	}{
		{"limits.max_body_bytes", f.Limits.MaxBodyBytes, func(n int64) { c.Limits.MaxBodyBytes = n }},
		{"limits.max_payload_bytes", f.Limits.MaxPayloadBytes, func(n int64) { c.Limits.MaxPayloadBytes = int(n) }},
	} {
		if l.v == nil {
			continue
		}
		n, problem := parseSize(l.v)
		if problem != "" {
			return s.errorf(l.key, "%s", problem)
		}
		if n > maxBodyBytesCeiling {
			return s.errorf(l.key, "%d bytes is above the ceiling of 1GiB", n)
		}
		l.set(n)
	}
	if f.Log.Level != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(f.Log.Level)); err != nil || !knownLevel(f.Log.Level) {
			return s.errorf("log.level", "%q is not a level (debug, info, warn or error)", f.Log.Level)
		}
		c.Log.Level = lvl
	}
	if f.Log.Format != "" {
		c.Log.Format = f.Log.Format
	}
	if f.Idempotency != nil {
		c.Idempotency = f.Idempotency
	}
	if f.Redact.Headers != nil {
		c.RedactHeaders = *f.Redact.Headers
	}
	if f.Redact.JSONPointers != nil {
		c.RedactPointers = *f.Redact.JSONPointers
	}
	if err := s.decodeRetention(f.Retention, &c.Retention); err != nil {
		return err
	}
	if err := s.compileSchemas(f.Schemas, filepath.Dir(file), c); err != nil {
		return err
	}
	collectors, err := s.decodeCollectors(f.Collectors)
	if err != nil {
		return err
	}
	c.Collectors = collectors
	if err := s.decodeReplay(f.Replay, &c.Replay); err != nil {
		return err
	}
	if err := s.decodeBulk(f.Bulk, &c.Bulk); err != nil {
		return err
	}
	if err := s.validateDestinations(f.Destinations, c.Collectors); err != nil {
		return err
	}
	if f.Destinations != nil {
		c.Destinations = f.Destinations
	}
	if err := s.decodeMetrics(f.Metrics, &c.Metrics); err != nil {
		return err
	}
	for i, p := range f.TrustedProxies {
		if _, err := clientip.Parse([]string{p}); err != nil {
			return s.errorf(fmt.Sprintf("trusted_proxies[%d]", i), "%q is not a CIDR (10.0.0.0/8) or an IP address", p)
		}
	}
	if f.TrustedProxies != nil {
		c.TrustedProxies, _ = clientip.Parse(f.TrustedProxies)
	}
	if err := s.decodeAlarms(f.Alarms, &c.Alarms); err != nil {
		return err
	}
	return s.decodeAuth(f.Auth, &c.Auth, len(f.TrustedProxies) > 0)
}

func knownLevel(s string) bool {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}

// validate checks every value, whichever layer set it.
func (c *Config) validate(src *configSource) error {
	if problem := checkListen(c.Listen); problem != "" {
		return src.errorf("listen", "%s", problem)
	}
	for _, u := range []struct{ key, v string }{{"public_url", c.PublicURL}, {"runbook_url", c.RunbookURL}} {
		if problem := checkHTTPURL(u.v); problem != "" {
			return src.errorf(u.key, "%s", problem)
		}
	}
	if err := storeopen.CheckURL(c.Database.Reveal()); err != nil {
		return src.errorf("database", "%s", quarantine.ErrorMessage(err))
	}
	if r := c.DatabaseRuntimeRole; r != "" {
		if storeopen.IsEmbedded(c.Database.Reveal()) {
			return src.errorf("database_runtime_role", "applies to PostgreSQL only: the embedded SQLite store has no roles")
		}
		if len(r) > 63 || strings.TrimSpace(r) != r || strings.ContainsAny(r, "\x00\r\n") {
			return src.errorf("database_runtime_role", "%q is not a PostgreSQL role name (at most 63 bytes, no surrounding spaces)", r)
		}
	}
	switch {
	case c.TLS.CertFile != "" && c.TLS.KeyFile == "":
		return src.errorf("tls.key_file", "tls.cert_file needs tls.key_file")
	case c.TLS.CertFile == "" && c.TLS.KeyFile != "":
		return src.errorf("tls.cert_file", "tls.key_file needs tls.cert_file")
	}
	for i, o := range c.Owners {
		key := fmt.Sprintf("owners[%d]", i)
		if strings.TrimSpace(o.Team) == "" {
			return src.errorf(key+".team", "every owner rule needs a team")
		}
		if len(o.Team) > 200 || !utf8.ValidString(o.Team) || strings.ContainsAny(o.Team, "\x00\r\n") {
			return src.errorf(key+".team", "a team must be one line of valid UTF-8, at most 200 bytes")
		}
		if len(o.Queues) == 0 {
			return src.errorf(key+".queues", "team %q needs at least one queue pattern", o.Team)
		}
		for j, q := range o.Queues {
			qkey := fmt.Sprintf("%s.queues[%d]", key, j)
			if q == "" {
				return src.errorf(qkey, "empty queue pattern")
			}
			if _, err := path.Match(q, ""); err != nil {
				return src.errorf(qkey, "bad glob pattern %q: %v", q, err)
			}
		}
	}
	if c.Limits.MaxPayloadBytes > 0 && int64(c.Limits.MaxPayloadBytes) > c.Limits.MaxBodyBytes {
		return src.errorf("limits.max_payload_bytes", "%d is above limits.max_body_bytes (%d): a payload travels inside a body",
			c.Limits.MaxPayloadBytes, c.Limits.MaxBodyBytes)
	}
	for i := range c.Idempotency {
		if err := c.Idempotency[i].Validate(); err != nil {
			return src.errorf(fmt.Sprintf("idempotency[%d].%s", i, quarantine.ErrorField(err)), "%s", quarantine.ErrorMessage(err))
		}
	}
	for i, h := range c.RedactHeaders {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, " :\r\n\x00") {
			return src.errorf(fmt.Sprintf("redact.headers[%d]", i), "%q is not a header name", h)
		}
	}
	for i, p := range c.RedactPointers {
		if err := api.ValidatePointer(p); err != nil {
			return src.errorf(fmt.Sprintf("redact.json_pointers[%d]", i), "%s", quarantine.ErrorMessage(err))
		}
	}
	if c.Retention.Every < minRetentionEvery {
		return src.errorf("retention.every", "%s is too often: at least 1s", c.Retention.Every)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return src.errorf("log.format", "%q is not a format (text or json)", c.Log.Format)
	}
	return nil
}

// checkHTTPURL returns a problem text when s is neither empty nor an
// absolute http(s) URL.
func checkHTTPURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := neturl.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an absolute http(s) URL, like https://quarantine.example.com", s)
	}
	return ""
}

// checkListen returns a problem text when s is not host:port.
func checkListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q: port %q is not a number between 0 and 65535", s, port)
	}
	if strings.ContainsAny(host, " /?#@") {
		return fmt.Sprintf("%q: %q is not a host name or address", s, host)
	}
	return ""
}

// compileSchemas compiles each job's JSON Schema file (a relative path is
// relative to the config file's directory) into c.Schemas, in job order,
// so that the first bad one is reported the same way every time.
func (s *configSource) compileSchemas(files map[string]string, dir string, c *Config) error {
	jobs := make([]string, 0, len(files))
	for j := range files {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, job := range jobs {
		key := "schemas." + job
		if strings.TrimSpace(job) == "" {
			return s.errorf("schemas", "a schema needs a job name")
		}
		p := files[job]
		if strings.TrimSpace(p) == "" {
			return s.errorf(key, "give the path of a JSON Schema file")
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		sch, err := rules.CompileSchema(p)
		if err != nil {
			return s.errorf(key, "not a usable JSON Schema: %s", err)
		}
		c.Schemas[job] = sch
	}
	return nil
}
