package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// writeConfig writes a config file in a temporary directory.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "quarantine.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// envOf returns a Getenv reading from m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfig_Defaults(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig("", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, DefaultConfig()) {
		t.Fatalf("got %+v, want the defaults %+v", c, DefaultConfig())
	}
	if c.Listen != "127.0.0.1:8080" || c.Database.Reveal() != "sqlite:./quarantine-data/quarantine.db" ||
		c.Limits.MaxBodyBytes != 10<<20 || c.Limits.MaxPayloadBytes != 1<<20 ||
		c.Log.Level != slog.LevelInfo || c.Log.Format != "text" {
		t.Fatalf("defaults changed: %+v", c)
	}
}

func TestLoadConfig_Example(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig("../../quarantine.example.yaml", envOf(nil))
	if err != nil {
		t.Fatalf("the example config must load: %v", err)
	}
	want := []quarantine.OwnerRule{
		{Team: "payments", Queues: []string{"payments.*", "billing"}},
		{Team: "reports", Queues: []string{"reports"}},
	}
	if !reflect.DeepEqual(c.Owners, want) {
		t.Fatalf("owners = %+v, want %+v", c.Owners, want)
	}
	if len(c.Idempotency) != 2 || c.Idempotency[1].JSONPointer != "/order_id" || c.Idempotency[1].Prefix != "order:" {
		t.Fatalf("idempotency = %+v", c.Idempotency)
	}
	// The example documents the defaults: apart from its example owners
	// and idempotency rules, it is them.
	d := DefaultConfig()
	c.Owners, d.Owners = nil, nil
	c.Idempotency, d.Idempotency = nil, nil
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("the example's values %+v differ from the defaults %+v", c, d)
	}
	if got := quarantine.AssignOwner(want, "payments.refunds"); got != "payments" {
		t.Fatalf("payments.refunds is owned by %q", got)
	}
}

func TestLoadConfig_Values(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, `
listen: 0.0.0.0:9090
database: postgres://q:pw@db.internal:5432/quarantine?sslmode=disable
owners:
  - team: ops
    queues: ["*"]
limits:
  max_body_bytes: 2097152
  max_payload_bytes: "512 KiB"
log: {level: DEBUG, format: json}
`)
	c, err := LoadConfig(p, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "0.0.0.0:9090" || c.Database.Reveal() != "postgres://q:pw@db.internal:5432/quarantine?sslmode=disable" {
		t.Fatalf("listen/database: %q %q", c.Listen, c.Database.Reveal())
	}
	if c.Limits.MaxBodyBytes != 2<<20 || c.Limits.MaxPayloadBytes != 512<<10 {
		t.Fatalf("limits: %+v", c.Limits)
	}
	if c.Log.Level != slog.LevelDebug || c.Log.Format != "json" {
		t.Fatalf("log: %+v", c.Log)
	}
}

func TestLoadConfig_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		yaml  string
		field string
		line  int // 0: the message names no line
		want  string
	}{
		{"collector without name", "collectors:\n  - kind: rabbitmq\n", "collectors[0].name", 0, "needs a name"},
		{"collector of unknown kind", "collectors:\n  - name: a\n    kind: mqtt\n", "collectors[0].kind", 0, `unknown kind "mqtt"`},
		{"kafka without topics", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [127.0.0.1:9092]\n", "collectors[0].topics", 0, "topics is required"},
		{"kafka bad broker", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [nohost]\n    topics: [a.dlq]\n", "collectors[0].brokers[0]", 0, "is not host:port"},
		{"kafka bad topic", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [127.0.0.1:9092]\n    topics: [\"a b\"]\n", "collectors[0].topics[0]", 0, "not a valid topic name"},
		{"kafka sasl", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [127.0.0.1:9092]\n    topics: [a.dlq]\n    sasl: {mechanism: GSSAPI, username: u, password: p}\n", "collectors[0].sasl.mechanism", 0, "is not one of PLAIN"},
		{"kafka session timeout", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [127.0.0.1:9092]\n    topics: [a.dlq]\n    session_timeout: 100ms\n", "collectors[0].session_timeout", 0, "between 1s and 30m"},
		{"kafka unknown key", "collectors:\n  - name: a\n    kind: kafka\n    brokers: [127.0.0.1:9092]\n    topics: [a.dlq]\n    topic: a\n", "collectors[0].topic", 0, "unknown field"},
		{"pubsub without subscription", "collectors:\n  - name: a\n    kind: pubsub\n    project: my-project\n", "collectors[0].subscription", 0, "subscription is required"},
		{"pubsub without project", "collectors:\n  - name: a\n    kind: pubsub\n    subscription: a.dlq-q\n", "collectors[0].project", 0, "project is required"},
		{"pubsub bad endpoint", "collectors:\n  - name: a\n    kind: pubsub\n    project: my-project\n    subscription: a.dlq-q\n    endpoint: http://x:1\n", "collectors[0].endpoint", 0, "is not host:port"},
		{"collector batch size", "collectors:\n  - name: a\n    kind: rabbitmq\n    batch_size: 0\n", "collectors[0].batch_size", 0, "between 1 and 10000"},
		{"collector commits", "collectors:\n  - name: a\n    kind: rabbitmq\n    commits: 17\n", "collectors[0].commits", 0, "between 1 and 16"},
		{"idempotency without source", "idempotency:\n  - queues: [orders]\n", "idempotency[0].header", 0, "exactly one of header and json_pointer"},
		{"idempotency bad pointer", "idempotency:\n  - queues: [orders]\n    json_pointer: order_id\n", "idempotency[0].json_pointer", 0, "not a JSON Pointer"},
		{"redact bad header", "redact:\n  headers: [\"a b\"]\n", "redact.headers[0]", 0, "not a header name"},
		{"redact unknown key", "redact:\n  pointers: [/card]\n", "redact.pointers", 2, `unknown key "pointers"`},
		{"unknown top key", "frobnicate: {a: 1}\n", "frobnicate", 1, `unknown key "frobnicate"`},
		{"replay publish attempts zero", "replay:\n  publish_attempts: 0\n", "replay.publish_attempts", 0, "between 1 and 100"},
		{"replay retry min above max", "replay:\n  retry_min: 2m\n  retry_max: 1m\n", "replay.retry_min", 0, "above replay.retry_max"},
		{"replay retry max no unit", "replay:\n  retry_max: 60\n", "replay.retry_max", 0, "must be a duration"},
		{"redact bad pointer", "redact:\n  json_pointers: [/ok, card]\n", "redact.json_pointers[1]", 0, "not a JSON Pointer"},
		{"redact pointer escape", "redact:\n  json_pointers: [\"/a~2\"]\n", "redact.json_pointers[0]", 0, "not a JSON Pointer"},
		{"redact pointers not a list", "redact:\n  json_pointers: /card\n", "redact.json_pointers", 2, "expected a list"},
		{"retention unknown key", "retention:\n  refailed: 1h\n", "retention.refailed", 2, `unknown key "refailed"`},
		{"retention word", "retention:\n  replayed: month\n", "retention.replayed", 2, `"month" is not a duration`},
		{"retention negative", "retention:\n  discarded: -1h\n", "retention.discarded", 2, "not a duration"},
		{"retention no unit", "retention:\n  discarded: 30\n", "retention.discarded", 2, "has no unit"},
		{"retention a list", "retention:\n  replayed: [1h]\n", "retention.replayed", 2, "expected a duration"},
		{"retention every zero", "retention:\n  every: 0\n", "retention.every", 2, "not a duration"},
		{"retention every too often", "retention:\n  every: 10ms\n", "retention.every", 2, "too often"},
		{"schemas not a mapping", "schemas: [a]\n", "schemas", 1, "expected a mapping"},
		{"schema missing file", "schemas:\n  charge: nope.json\n", "schemas.charge", 2, "not a usable JSON Schema"},
		{"schema empty path", "schemas:\n  charge: \"\"\n", "schemas.charge", 2, "path of a JSON Schema"},
		{"unknown nested key", "limits:\n  max_body: 5\n", "limits.max_body", 2, `unknown key "max_body" in limits`},
		{"unknown owner key", "owners:\n  - team: a\n    queue: [x]\n", "owners[0].queue", 3, `unknown key "queue"`},
		{"bad glob", "owners:\n  - team: a\n    queues: [ok]\n  - team: b\n    queues: [\"[\", x]\n", "owners[1].queues[0]", 5, `bad glob pattern "["`},
		{"empty pattern", "owners:\n  - team: a\n    queues: [\"\"]\n", "owners[0].queues[0]", 3, "empty queue pattern"},
		{"team missing", "owners:\n  - queues: [a]\n", "owners[0].team", 0, "needs a team"},
		{"no queues", "owners:\n  - team: a\n", "owners[0].queues", 0, "at least one queue pattern"},
		{"owners not a list", "owners: {team: a}\n", "owners", 1, "expected a list"},
		{"listen not host:port", "listen: abc\n", "listen", 1, `"abc" is not host:port`},
		{"trusted proxy not a CIDR", "trusted_proxies: [10.0.0.0/8, 10.0.0.0/33]\n", "trusted_proxies[1]", 1, `"10.0.0.0/33" is not a CIDR`},
		{"listen bad port", "listen: \"127.0.0.1:99999\"\n", "listen", 1, "port"},
		{"listen a list", "listen: [a]\n", "listen", 1, "expected a string"},
		{"duplicate key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", "listen", 2, "already defined"},
		{"database scheme", "database: mysql://u:hunter2@h/x\n", "database", 1, "unsupported database URL"},
		{"database sqlite://", "database: sqlite://x.db\n", "database", 1, "sqlite:PATH"},
		{"database empty path", "database: \"sqlite:\"\n", "database", 1, "needs a file path"},
		{"limits not a mapping", "limits: 5\n", "limits", 1, "expected a mapping"},
		{"size word", "limits:\n  max_body_bytes: ten\n", "limits.max_body_bytes", 2, `"ten" is not a size`},
		{"size negative", "limits:\n  max_body_bytes: -1\n", "limits.max_body_bytes", 2, "not a positive size"},
		{"size zero", "limits:\n  max_payload_bytes: 0\n", "limits.max_payload_bytes", 2, "not a positive size"},
		{"size too big", "limits:\n  max_body_bytes: 2GiB\n", "limits.max_body_bytes", 2, "ceiling"},
		{"size fraction", "limits:\n  max_body_bytes: 1.5\n", "limits.max_body_bytes", 2, "whole number"},
		{"payload above body", "limits:\n  max_body_bytes: 1MiB\n  max_payload_bytes: 2MiB\n", "limits.max_payload_bytes", 3, "above limits.max_body_bytes"},
		{"log level", "log:\n  level: loud\n", "log.level", 2, `"loud" is not a level`},
		{"log format", "log:\n  format: xml\n", "log.format", 2, `"xml" is not a format`},
		{"not a mapping", "- listen\n", "", 1, "expected a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := writeConfig(t, tc.yaml)
			_, err := LoadConfig(p, envOf(nil))
			if err == nil {
				t.Fatalf("no error for %q", tc.yaml)
			}
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("code %q field %q, want invalid %q: %v", quarantine.ErrorCode(err), quarantine.ErrorField(err), tc.field, err)
			}
			msg := describe(err)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q does not say %q", msg, tc.want)
			}
			if !strings.Contains(msg, tc.field) {
				t.Fatalf("message %q does not name the key %q", msg, tc.field)
			}
			if tc.line > 0 {
				at := p + ":" + string(rune('0'+tc.line)) + ":"
				if !strings.HasPrefix(msg, at) {
					t.Fatalf("message %q does not start with %q", msg, at)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Fatalf("message %q leaks the password", msg)
			}
		})
	}
}

func TestLoadConfig_OperationsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "charge.json"), []byte(`{"type":"object","required":["amount"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(p, []byte(`
redact:
  json_pointers: [/card/number, "/a~1b"]
schemas:
  charge_card: charge.json
retention: {replayed: 30d, discarded: 0, every: 90s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.RedactPointers, []string{"/card/number", "/a~1b"}) || !reflect.DeepEqual(c.RedactHeaders, DefaultConfig().RedactHeaders) {
		t.Fatalf("redact: %v %v", c.RedactPointers, c.RedactHeaders)
	}
	if c.Retention != (RetentionConfig{Replayed: 30 * 24 * time.Hour, Discarded: 0, Every: 90 * time.Second}) {
		t.Fatalf("retention: %+v", c.Retention)
	}
	sch := c.Schemas["charge_card"]
	if len(c.Schemas) != 1 || sch == nil || sch.Path() != filepath.Join(dir, "charge.json") {
		t.Fatalf("schemas: %v", c.Schemas)
	}
	if v, err := sch.Validate([]byte(`{}`)); err != nil || len(v) != 1 {
		t.Fatalf("the compiled schema does not apply: %v %v", v, err)
	}

	// A file that is no JSON Schema names the key and the file.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("schemas:\n  refund: "+bad+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(p, envOf(nil))
	if quarantine.ErrorField(err) != "schemas.refund" || !strings.Contains(describe(err), "bad.json") || !strings.HasPrefix(describe(err), p+":2:") {
		t.Fatalf("bad schema: %v", err)
	}
}

func TestResolveConfig_Precedence(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, "listen: 127.0.0.1:1001\ndatabase: sqlite:/tmp/file.db\n")
	other := writeConfig(t, "listen: 127.0.0.1:1004\n")
	for _, tc := range []struct {
		name          string
		path          string
		env           map[string]string
		flags         Overrides
		listen, dbURL string
	}{
		{"defaults", "", nil, Overrides{}, DefaultListen, "sqlite:./quarantine-data/quarantine.db"},
		{"file", file, nil, Overrides{}, "127.0.0.1:1001", "sqlite:/tmp/file.db"},
		{"file from env", "", map[string]string{EnvConfig: file}, Overrides{}, "127.0.0.1:1001", "sqlite:/tmp/file.db"},
		{"flag path beats env path", other, map[string]string{EnvConfig: file}, Overrides{}, "127.0.0.1:1004", "sqlite:./quarantine-data/quarantine.db"},
		{"env beats file", file, map[string]string{EnvListen: "127.0.0.1:1002", EnvDatabase: "sqlite:/tmp/env.db"}, Overrides{}, "127.0.0.1:1002", "sqlite:/tmp/env.db"},
		{"flags beat env", file, map[string]string{EnvListen: "127.0.0.1:1002", EnvDatabase: "sqlite:/tmp/env.db"},
			Overrides{Listen: "127.0.0.1:1003", Database: "postgres://postgres@127.0.0.1:5432/test"}, "127.0.0.1:1003", "postgres://postgres@127.0.0.1:5432/test"},
		{"one flag, one env", file, map[string]string{EnvDatabase: "sqlite:/tmp/env.db"}, Overrides{Listen: "127.0.0.1:1003"}, "127.0.0.1:1003", "sqlite:/tmp/env.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ResolveConfig(tc.path, envOf(tc.env), tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if c.Listen != tc.listen || c.Database.Reveal() != tc.dbURL {
				t.Fatalf("got listen %q database %q, want %q %q", c.Listen, c.Database.Reveal(), tc.listen, tc.dbURL)
			}
		})
	}
}

func TestResolveConfig_ErrorNamesTheSource(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, "listen: 127.0.0.1:1001\n")
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags Overrides
		want  string
	}{
		{"env", map[string]string{EnvListen: "nope"}, Overrides{}, `QUARANTINE_LISTEN (listen): "nope" is not host:port`},
		{"flag", map[string]string{EnvListen: "127.0.0.1:1"}, Overrides{Listen: "nope"}, `--listen (listen): "nope" is not host:port`},
		{"flag database", nil, Overrides{Database: "postgres://u:hunter2@/"}, "--database (database)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ResolveConfig(file, envOf(tc.env), tc.flags)
			if err == nil || !strings.Contains(describe(err), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q leaks the password", err)
			}
		})
	}
}

func TestLoadConfig_MissingFile(t *testing.T) {
	t.Parallel()
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml"), envOf(nil))
	if quarantine.ErrorField(err) != "config" || !strings.Contains(describe(err), "nope.yaml") {
		t.Fatalf("error %v does not name the missing file", err)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{uint64(1024), 1024, true},
		{int64(7), 7, true},
		{"10MiB", 10 << 20, true},
		{"10 mib", 10 << 20, true},
		{"1MB", 1000000, true},
		{"512KiB", 512 << 10, true},
		{"3kb", 3000, true},
		{"1GiB", 1 << 30, true},
		{"99B", 99, true},
		{"2048", 2048, true},
		{float64(4096), 4096, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"1.5MiB", 0, false},
		{"10 TiB", 0, false},
		{"-5", 0, false},
		{"99999999999999999GiB", 0, false},
		{true, 0, false},
		{[]any{1}, 0, false},
	} {
		got, problem := parseSize(tc.in)
		if (problem == "") != tc.ok || got != tc.want {
			t.Errorf("parseSize(%#v) = %d, %q; want %d ok=%v", tc.in, got, problem, tc.want, tc.ok)
		}
	}
}

// The example's collectors are commented out (they need brokers); the
// commented block must still be a valid configuration.
func TestLoadConfig_ExampleCollectors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../quarantine.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, "# collectors:"), strings.Index(s, "\ncollectors: []")
	if i < 0 || j < i {
		t.Fatal("the example has no commented collectors block")
	}
	var b strings.Builder
	for _, line := range strings.Split(s[i:j], "\n") {
		b.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "# "), "#") + "\n")
	}
	c, err := LoadConfig(writeConfig(t, b.String()), envOf(nil))
	if err != nil {
		t.Fatalf("the commented collectors do not load: %v\n%s", err, b.String())
	}
	kinds := map[string]int{}
	for _, cc := range c.Collectors {
		kinds[cc.Kind]++
	}
	if len(c.Collectors) != 6 || kinds["rabbitmq"] != 1 || kinds["sqs"] != 1 || kinds["nats"] != 2 || kinds["kafka"] != 1 || kinds["pubsub"] != 1 {
		t.Fatalf("collectors %+v", c.Collectors)
	}
}
