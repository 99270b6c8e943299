package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// cluster is three `quarantine serve` processes of the built binary on
// one PostgreSQL schema, behind a balancer.
type cluster struct {
	t     *testing.T
	db    string // the schema's URL
	procs []*testbin.Process
	lb    *balancer
	token string // the admin token the first start printed
}

// instanceConfig is each instance's quarantine.yaml: its database URL
// (the schema's, naming the instance as its application_name), its
// port, the RabbitMQ URL, the collectors' failure queue, the replay
// queue (published to through the collector's broker), the alarms'
// webhook.
const instanceConfig = `database: %q
listen: 127.0.0.1:%d
collectors:
  - name: orders
    kind: rabbitmq
    url: %q
    queue: %q
destinations:
  - queues: [%q]
    collector: orders
replay: {canary: 0, poll: 50ms, lease: 2s, incident_rate: 100000}
alarms:
  - queues: ["never-*"]
    max_age: 1h
    interval: 100ms
    receivers: [{webhook: %q}]
`

// startCluster starts n instances on db (the first migrates it) and the
// balancer in front of them.
func startCluster(t *testing.T, n int, db, amqpURL, dlq, work string) *cluster {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	bin := testbin.Path(t)
	c := &cluster{t: t, db: db}
	dir := t.TempDir()
	addrs := make([]string, n)
	for i := range n {
		u, err := url.Parse(db)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", fmt.Sprintf("q%d", i))
		u.RawQuery = q.Encode()
		cfg := filepath.Join(dir, fmt.Sprintf("q%d.yaml", i))
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(instanceConfig, u.String(), freePort(t), amqpURL, dlq, work, hook.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		var args []string
		if i == 0 {
			args = append(args, "--migrate")
		}
		p := testbin.Serve(t, bin, cfg, args...)
		if i == 0 {
			c.token = p.Token
		}
		c.procs = append(c.procs, p)
		addrs[i] = p.Addr
	}
	if c.token == "" {
		t.Fatal("the first instance printed no admin token")
	}
	c.lb = startBalancer(t, addrs)
	return c
}

// api is the admin's client through the balancer.
func (c *cluster) api() testbin.API { return testbin.API{Base: c.lb.URL, Token: c.token} }

// query runs a one-row query on the cluster's database.
func (c *cluster) query(sql string, args []any, dst ...any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dst...); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
}

// alarmHolders lists the instances (their application_name) whose
// session holds the schema's alarm lock, the advisory lock the
// evaluator runs under.
func (c *cluster) alarmHolders() []string {
	c.t.Helper()
	var names []string
	c.query(`SELECT coalesce(array_agg(a.application_name ORDER BY a.application_name), '{}') FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted
		AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(current_schema() || '.quarantine.alarms', 0)`, nil, &names)
	return names
}

// waitAlarmHolder waits until exactly one instance holds the alarm lock
// and returns its index.
func (c *cluster) waitAlarmHolder(within time.Duration) int {
	c.t.Helper()
	var got []string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = c.alarmHolders(); len(got) == 1 {
			i, err := strconv.Atoi(got[0][1:])
			if err != nil {
				c.t.Fatalf("alarm lock held by %q", got[0])
			}
			return i
		}
		if len(got) > 1 {
			c.t.Fatalf("the alarm lock is held by %v at once", got)
		}
	}
	c.t.Fatalf("the alarm lock holders are %v after %s, want exactly one", got, within)
	return -1
}

var publishedRe = regexp.MustCompile(`(?m)^quarantine_replay_published_total\{outcome="published",queue="[^"]*"\} (\d+)`)

// published returns how many replay items instance i published and
// recorded (its /metrics, asked directly).
func (c *cluster) published(i int) int {
	c.t.Helper()
	_, raw := c.procs[i].API("").Do(c.t, "GET", "/metrics", nil, nil)
	n := 0
	for _, m := range publishedRe.FindAllStringSubmatch(string(raw), -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// kill sends SIGKILL to instance i and waits until it is gone.
func (c *cluster) kill(i int) {
	c.t.Helper()
	c.procs[i].Kill()
	if !c.procs[i].Exited(5 * time.Second) {
		c.t.Fatalf("instance q%d survived SIGKILL", i)
	}
}
