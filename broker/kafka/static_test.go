package kafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// instance_id must be a usable group.instance.id when it is given: the
// error names the key.
func TestConfigInstanceID(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		id   *string
		want string // "" valid, else a part of the message
	}{
		{nil, ""},
		{str("quarantine-1"), ""},
		{str("serve.eu_west-1"), ""},
		{str(""), "is empty"},
		{str("pod 1"), "not a valid group instance id"},
		{str("."), "not a valid group instance id"},
		{str(strings.Repeat("a", 250)), "longer than 249 bytes"},
	} {
		c := Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"a.dlq"}, InstanceID: tc.id}
		err := c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", *tc.id, err)
			}
			continue
		}
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "instance_id" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (field %q), want EINVALID on instance_id saying %q", *tc.id, err, quarantine.ErrorField(err), tc.want)
		}
	}
}

// instance_id_env names a variable read when the collector starts: it
// excludes instance_id, and the variable must be set and hold a valid
// id. The errors name instance_id_env.
func TestConfigInstanceIDEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"POD_NAME": "quarantine-0", "EMPTY": "", "SPACED": "pod 0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	id := "serve-1"
	for _, tc := range []struct {
		name     string
		mod      func(*Config)
		invalid  string // Validate's error, a part of its message
		resolved string // the id read, or withInstanceID's error when it starts with "!"
	}{
		{"none", func(*Config) {}, "", ""},
		{"literal", func(c *Config) { c.InstanceID = &id }, "", "serve-1"},
		{"env", func(c *Config) { c.InstanceIDEnv = "POD_NAME" }, "", "quarantine-0"},
		{"both", func(c *Config) { c.InstanceID, c.InstanceIDEnv = &id, "POD_NAME" }, "not both", ""},
		{"bad name", func(c *Config) { c.InstanceIDEnv = "POD-NAME" }, "not an environment variable name", ""},
		{"digit first", func(c *Config) { c.InstanceIDEnv = "0POD" }, "not an environment variable name", ""},
		{"unset", func(c *Config) { c.InstanceIDEnv = "NOT_SET" }, "", "!NOT_SET is not set"},
		{"empty", func(c *Config) { c.InstanceIDEnv = "EMPTY" }, "", "!is empty"},
		{"not an id", func(c *Config) { c.InstanceIDEnv = "SPACED" }, "", "!not a valid group instance id"},
	} {
		c := Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"a.dlq"}}
		tc.mod(&c)
		err := c.Validate()
		if tc.invalid != "" {
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "instance_id_env" || !strings.Contains(err.Error(), tc.invalid) {
				t.Errorf("%s: Validate: %v, want EINVALID on instance_id_env saying %q", tc.name, err, tc.invalid)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Validate: %v", tc.name, err)
			continue
		}
		got, err := c.withInstanceID(lookup)
		if want, ok := strings.CutPrefix(tc.resolved, "!"); ok {
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "instance_id_env" || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want EINVALID on instance_id_env saying %q", tc.name, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		gotID := ""
		if got.InstanceID != nil {
			gotID = *got.InstanceID
		}
		if gotID != tc.resolved {
			t.Errorf("%s: instance id %q, want %q", tc.name, gotID, tc.resolved)
		}
	}
}

// describeMembers returns the instance ids of group's members ("" for a
// dynamic member).
func (k *cluster) describeMembers(group string) []string {
	k.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := k.admin().DescribeGroups(ctx, group)
	if err != nil {
		k.tb.Fatal(err)
	}
	var ids []string
	for _, m := range gs[group].Members {
		id := ""
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		ids = append(ids, id)
	}
	return ids
}

// TestStaticMemberRestartAfterKill kills `quarantine serve` (SIGKILL: it
// cannot leave the group) mid-drain and starts it again. With an
// instance_id, or an instance_id_env naming a variable that holds it, the
// restarted collector is the same static member (KIP-345): it reads again
// well before the session timeout. Without one (the control) it waits for
// the killed member's session to expire. Either way every record is
// stored exactly once and the offsets reach the end.
func TestStaticMemberRestartAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the quarantine binary")
	}
	t.Parallel()
	bin := testbin.Path(t)
	const session = 24 * time.Second
	for _, tc := range []struct {
		name, instanceID string
		fromEnv          bool // instance_id_env: POD_NAME, with POD_NAME=instanceID
	}{{"static", "serve-1", false}, {"static from env", "quarantine-0", true}, {"dynamic", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const topic, n = "orders.DLT", 3000
			k := newCluster(t, 3, topic)
			var rs []*kgo.Record
			for i := range n {
				rs = append(rs, springRecord(topic, "orders", int32(i%3), int64(i), []byte(fmt.Sprint("k", i%11)),
					[]byte(fmt.Sprintf(`{"i":%d}`, i)), time.UnixMilli(1_700_000_000_000+int64(i)), "java.lang.RuntimeException", "boom"))
			}
			k.produce(rs...)
			db := filepath.Join(t.TempDir(), "q.db")
			config := filepath.Join(t.TempDir(), "quarantine.yaml")
			yaml := fmt.Sprintf("database: sqlite:%s\nlisten: 127.0.0.1:0\ncollectors:\n  - name: killed\n    kind: kafka\n"+
				"    batch_size: 20\n    linger: 5ms\n    brokers: [%s]\n    topics: [%s]\n    session_timeout: %s\n", db, k.addrs[0], topic, session)
			var env []string
			switch {
			case tc.fromEnv:
				yaml += "    instance_id_env: POD_NAME\n"
				env = append(env, "POD_NAME="+tc.instanceID)
			case tc.instanceID != "":
				yaml += "    instance_id: " + tc.instanceID + "\n"
			}
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			// progressed waits until the group committed more than
			// before, and says how long that took.
			progressed := func(p *process, before int64, within time.Duration) time.Duration {
				start := time.Now()
				for k.committed(DefaultGroup, topic) <= before {
					if !p.running() {
						t.Fatalf("the process exited:\n%s", p.stderr)
					}
					if time.Since(start) > within {
						t.Fatalf("no commit after %s; output:\n%s", within, p.stderr)
					}
					time.Sleep(5 * time.Millisecond)
				}
				return time.Since(start)
			}

			p := startProcess(t, bin, config, env...)
			first := progressed(p, 0, patience*60*time.Second)
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.exited
			killed := time.Now()
			before := k.committed(DefaultGroup, topic)
			if before >= n {
				t.Fatalf("drained before the kill")
			}

			p = startProcess(t, bin, config, env...)
			progressed(p, before, 3*session)
			back := time.Since(killed)
			t.Logf("first commit %s after the first start; reading again %s after the kill (session timeout %s)", first, back, session)
			if tc.instanceID != "" {
				if back > session/3 {
					t.Errorf("the static member read again %s after the kill, want well before the session timeout %s", back, session)
				}
				if ids := k.describeMembers(DefaultGroup); len(ids) != 1 || ids[0] != tc.instanceID {
					t.Errorf("group members' instance ids %q, want [%q]", ids, tc.instanceID)
				}
			} else if back < session*2/3 {
				// The control: without an instance id the group
				// waits for the killed member's session. If it did
				// not, the static arm would prove nothing.
				t.Errorf("a dynamic member read again %s after the kill, before the session timeout %s: the test cannot tell static membership", back, session)
			}

			eventually(t, 90*time.Second, "the drain finished", func() bool { return k.committedLag(DefaultGroup, topic) == 0 })
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("the process did not stop on SIGTERM:\n%s", p.stderr)
			}
			st, err := sqlite.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ms := allMessages(t, st, "killed")
			seen := map[string]bool{}
			for _, m := range ms {
				if seen[m.MessageID] {
					t.Fatalf("record %s stored twice", m.MessageID)
				}
				seen[m.MessageID] = true
			}
			if len(ms) != n {
				t.Fatalf("%d records stored, want %d", len(ms), n)
			}
		})
	}
}
