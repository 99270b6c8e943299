package postgres_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// binaryRead is one request BenchmarkBinaryReads times: a GET, or a POST
// of body; path(i) is the path of call i (a new search term each call).
// check, when set, says what is wrong with an answer's body ("" when
// nothing is).
type binaryRead struct {
	name  string
	ui    bool // a page of the web UI (signed in), else the API (bearer token)
	path  func(i int) string
	body  string
	check func(body []byte) string
}

// fixed is the path of a read that asks the same each call.
func fixed(p string) func(int) string { return func(int) string { return p } }

// items checks that an API answer's member name holds between lo and hi
// entries.
func items(name string, lo, hi int) func([]byte) string {
	return func(raw []byte) string {
		var v map[string]json.RawMessage
		if err := json.Unmarshal(raw, &v); err != nil {
			return err.Error()
		}
		var list []json.RawMessage
		if err := json.Unmarshal(v[name], &list); err != nil {
			return fmt.Sprintf("%s: %v", name, err)
		}
		if len(list) < lo || len(list) > hi {
			return fmt.Sprintf("%d %s, want %d to %d", len(list), name, lo, hi)
		}
		return ""
	}
}

// binaryReads are the reads of issue 23 (items 9 and 10) on a seed of
// rows messages (internal/pgseed: 20 queues, 5 owners, 70% quarantined,
// 300 failure groups): the first page of the list, unfiltered and by
// queue, status (the common and a rarer one), owner and two of them, a
// sample of 100, the failure groups, a search of a rare term (an order
// ID of one payload, a different one each call), the queue list (and by
// status), a /metrics scrape, and the web UI's overview, list and groups.
func binaryReads(rows int) []binaryRead {
	pick := func(i int) int { return (i*7919 + 12345) % rows }
	page := items("items", 50, 50)
	return []binaryRead{
		{name: "list", path: fixed("/api/v1/messages?limit=50"), check: page},
		{name: "list-queue", path: fixed("/api/v1/messages?limit=50&queue=queue-03"), check: page},
		{name: "list-status", path: fixed("/api/v1/messages?limit=50&status=quarantined"), check: page},
		{name: "list-status-rare", path: fixed("/api/v1/messages?limit=50&status=refailed"), check: page},
		{name: "list-owner", path: fixed("/api/v1/messages?limit=50&owner=team-2"), check: page},
		{name: "list-queue-status", path: fixed("/api/v1/messages?limit=50&queue=queue-03&status=quarantined"), check: page},
		{name: "list-owner-status", path: fixed("/api/v1/messages?limit=50&owner=team-2&status=discarded"), check: page},
		{name: "sample-100", path: fixed("/api/v1/messages/sample"), body: `{"size":100}`, check: items("items", 100, 100)},
		{name: "sample-100-queue", path: fixed("/api/v1/messages/sample"), body: `{"size":100,"filter":{"queue":["queue-03"],"status":["quarantined"]}}`, check: items("items", 100, 100)},
		{name: "groups", path: fixed("/api/v1/groups"), check: items("items", 1, 1000)},
		{name: "groups-status", path: fixed("/api/v1/groups?status=quarantined"), check: items("items", 1, 1000)},
		{name: "search-rare", path: func(i int) string {
			return "/api/v1/messages?limit=50&q=" + url.QueryEscape(fmt.Sprintf(`"idem-%d"`, pick(i)))
		}, check: items("items", 1, 1)},
		{name: "queues", path: fixed("/api/v1/queues"), check: items("items", 20, 20)},
		// internal/pgseed quarantines messages of 14 queues only (the
		// status and the queue both follow the message's number).
		{name: "queues-status", path: fixed("/api/v1/queues?status=quarantined"), check: items("items", 14, 20)},
		{name: "metrics", path: fixed("/metrics")},
		{name: "ui-overview", ui: true, path: fixed("/overview")},
		{name: "ui-messages", ui: true, path: fixed("/messages")},
		{name: "ui-messages-status", ui: true, path: fixed("/messages?status=quarantined")},
		{name: "ui-groups", ui: true, path: fixed("/groups")},
	}
}

// BenchmarkBinaryReads measures the reads of issue 23 through the built
// binary as users run it (`quarantine serve` on the persistent schema
// bench_<rows>, seeded once per machine by internal/pgseed with
// QUARANTINE_BENCH_ROWS messages, default 1,000,000): each read's time
// from the request to the last byte at an HTTP client, p50 and p99 (ms)
// over QUARANTINE_BENCH_CALLS calls (default 20) after 3 warm-up ones,
// printed as a table. Retention is off in the service's configuration
// (the seeded replayed and discarded messages are older than its
// default, and their purge would rewrite the data set). Run with
// -benchtime=1x, under the benchmarks' lock:
//
//	QUARANTINE_BENCH_ROWS=10000000 flock /work/helpers/bench.lock \
//		go test -run '^$' -bench '^BenchmarkBinaryReads$' -benchtime=1x -timeout 1h ./store/postgres/
func BenchmarkBinaryReads(b *testing.B) {
	rows := benchRows(b)
	u := pgtest.PersistentURL(b, benchSchema(rows))
	s := benchStore(b, rows)
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: "reads-" + quarantine.NewID(time.Now()), Role: quarantine.RoleAdmin, SecretHash: hash}
	if err := s.CreateToken(b.Context(), tok, "bench"); err != nil {
		b.Fatal(err)
	}
	config := filepath.Join(b.TempDir(), "quarantine.yaml")
	yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\nretention: {replayed: 0, discarded: 0}\n", u)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	p := testbin.Serve(b, testbin.Path(b), config)
	reads := binaryReads(rows)
	report := timeReads(b, "", "http://"+p.Addr, secret, reads, storetest.BurstCalls(b))
	fmt.Printf("BenchmarkBinaryReads, %d messages:\n%s", rows, report)
}

// timeReads signs in to the web UI with the token's secret, then times
// reads against the service at base (see BenchmarkBinaryReads), reports
// each read's p50 and p99 (named after prefix and the read) and returns
// them as a table.
func timeReads(b *testing.B, prefix, base, secret string, reads []binaryRead, calls int) string {
	jar, err := cookiejar.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := client.Get(base + "/?token=" + url.QueryEscape(secret))
	if err != nil {
		b.Fatal(err)
	}
	login.Body.Close()
	if login.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign in: %d", login.StatusCode)
	}
	do := func(r binaryRead, i int) time.Duration {
		method, body := http.MethodGet, io.Reader(nil)
		if r.body != "" {
			method, body = http.MethodPost, strings.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(b.Context(), method, base+r.path(i), body)
		if err != nil {
			b.Fatal(err)
		}
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if !r.ui {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatalf("%s: %v", r.name, err)
		}
		var raw bytes.Buffer
		_, err = raw.ReadFrom(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("%s: %v", r.name, err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d %.300s", method, r.path(i), resp.StatusCode, raw.String())
		}
		if r.check != nil {
			if problem := r.check(raw.Bytes()); problem != "" {
				b.Fatalf("%s %s: %s", method, r.path(i), problem)
			}
		}
		return d
	}
	b.ResetTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "%d calls each\n%-20s %10s %10s\n", calls, "read", "p50", "p99")
	call := 0
	for _, r := range reads {
		for range 3 {
			do(r, call)
			call++
		}
		ds := make([]time.Duration, calls)
		for i := range ds {
			ds[i] = do(r, call)
			call++
		}
		slices.Sort(ds)
		p50 := float64(ds[len(ds)/2].Microseconds()) / 1e3
		p99 := float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds()) / 1e3
		b.ReportMetric(p50, prefix+r.name+"-p50-ms")
		b.ReportMetric(p99, prefix+r.name+"-p99-ms")
		fmt.Fprintf(&out, "%-20s %8.2fms %8.2fms\n", r.name, p50, p99)
	}
	b.ReportMetric(0, "ns/op")
	return out.String()
}

// burstEnvelopes returns envelopes lo .. hi-1 of a burst: 20 queues
// (queue-00 …), 7 job names, 300 reasons, 1 KiB payloads, failed within
// the hour before now.
func burstEnvelopes(lo, hi int, now time.Time) []byte {
	var buf bytes.Buffer
	buf.WriteByte('[')
	pad := strings.Repeat("x", 900)
	for i := lo; i < hi; i++ {
		if i > lo {
			buf.WriteByte(',')
		}
		failed := now.Add(-time.Duration(uint64(i)*2654435761%uint64(59*time.Minute/time.Millisecond)) * time.Millisecond)
		fmt.Fprintf(&buf, `{"envelope":"quarantine.failure/v1","job":{"id":"b-%d","name":"job-%d","queue":"queue-%02d",`+
			`"idempotency_key":"idem-%d","attempts":3,"payload":{"order_id":"idem-%d","customer":"c-%d","note":%q}},`+
			`"failure":{"class":"exhausted","reason":"burst failure %d: upstream timeout","failed_at":%q}}`,
			i, i%7, i%20, i, i, i%9973, pad, i%300, failed.UTC().Format(time.RFC3339Nano))
	}
	buf.WriteByte(']')
	return buf.Bytes()
}

// BenchmarkBinaryBurst measures, through the built binary on each store
// of QUARANTINE_BENCH_STORES (default postgres and sqlite; a fresh
// database each), the reads of a burst: QUARANTINE_BENCH_ROWS dead
// letters (default 1,000,000) first ingested over HTTP (POST
// /api/v1/ingest, arrays of 1,000 from 4 clients at once, 1 KiB
// payloads, failed within the last hour), then GET /api/v1/queues,
// /overview, a /metrics scrape and the other first pages of the API and
// the UI (storetest.BurstPaths), each p50 and p99 (ms) at an HTTP client
// over QUARANTINE_BENCH_CALLS calls (default 20). The service's clock is
// the real one: the burst is in the last hour when it is read. Run with
// -benchtime=1x under the benchmarks' lock:
//
//	flock /work/helpers/bench.lock go test -run '^$' -bench '^BenchmarkBinaryBurst$' -benchtime=1x -timeout 1h ./store/postgres/
func BenchmarkBinaryBurst(b *testing.B) {
	rows := benchRows(b)
	stores, _ := testbin.BenchStores()
	var reads []binaryRead
	for _, p := range storetest.BurstPaths {
		reads = append(reads, binaryRead{name: p.Name, ui: p.UI, path: fixed(p.Path)})
	}
	var owners strings.Builder
	owners.WriteString("owners:\n")
	for t := range 5 {
		fmt.Fprintf(&owners, "  - team: team-%d\n    queues: [", t)
		for k := t; k < 20; k += 5 {
			if k > t {
				owners.WriteString(", ")
			}
			fmt.Fprintf(&owners, "queue-%02d", k)
		}
		owners.WriteString("]\n")
	}
	for _, store := range stores {
		db := testbin.BenchDatabase(b, store)
		config := filepath.Join(b.TempDir(), "quarantine.yaml")
		yaml := fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\n%s", db, owners.String())
		if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
			b.Fatal(err)
		}
		p := testbin.Serve(b, testbin.Path(b), config, "--migrate")
		if p.Token == "" {
			b.Fatalf("%s: serve printed no token:\n%s", store, p.Output())
		}
		api := p.API(p.Token)
		now := time.Now()
		t0 := time.Now()
		const batch, clients = 1000, 4
		next := make(chan int, rows/batch+1)
		for lo := 0; lo < rows; lo += batch {
			next <- lo
		}
		close(next)
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for lo := range next {
					body := burstEnvelopes(lo, min(lo+batch, rows), now)
					req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, api.Base+"/api/v1/ingest", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					req.Header.Set("Authorization", "Bearer "+api.Token)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("ingest: %d %.300s", resp.StatusCode, raw)
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		took := time.Since(t0)
		b.ReportMetric(float64(rows)/took.Seconds(), store+"-ingest-msgs/s")
		var queues struct {
			Items []struct {
				Inflow1h int64 `json:"inflow_1h"`
			} `json:"items"`
		}
		api.MustDo(b, http.StatusOK, http.MethodGet, "/api/v1/queues", nil, &queues)
		var in1h int64
		for _, q := range queues.Items {
			in1h += q.Inflow1h
		}
		if in1h != int64(rows) {
			b.Fatalf("%s: the queues' 1-hour inflow is %d, want the %d ingested", store, in1h, rows)
		}
		report := timeReads(b, store+"-", api.Base, p.Token, reads, storetest.BurstCalls(b))
		fmt.Printf("BenchmarkBinaryBurst, %s, %d ingested over HTTP in %v (%.0f msg/s), read %v after the first:\n%s",
			store, rows, took.Round(time.Second), float64(rows)/took.Seconds(), time.Since(now).Round(time.Second), report)
		p.Kill()
	}
}
