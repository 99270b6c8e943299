package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// planQueries are the queries whose plans must not scan messages
// sequentially, built by the store's own query builders.
func planQueries() []struct {
	name string
	sql  string
	args []any
} {
	cursor := &quarantine.Cursor{FailedAt: time.Date(2025, 5, 20, 0, 0, 0, 0, time.UTC), ID: "00000000000000000000001000"}
	type q = struct {
		name string
		sql  string
		args []any
	}
	list := func(name string, f quarantine.Filter) q {
		sql, args := postgres.ListQuery(f)
		return q{"list " + name, sql, args}
	}
	count := func(name string, f quarantine.Filter) q {
		sql, args := postgres.CountQuery(f)
		return q{"count " + name, sql, args}
	}
	return []q{
		list("no filter", quarantine.Filter{}),
		list("cursor", quarantine.Filter{After: cursor}),
		list("queue", quarantine.Filter{Queue: []string{"queue-03"}}),
		list("queue+cursor", quarantine.Filter{Queue: []string{"queue-03"}, After: cursor}),
		list("job_name", quarantine.Filter{JobName: []string{"job-3"}}),
		list("failure_class", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassExpired}}),
		list("two job_names", quarantine.Filter{JobName: []string{"job-3", "job-4"}}),
		list("job_name+queue", quarantine.Filter{JobName: []string{"job-3"}, Queue: []string{"queue-03"}}),
		list("job_name+cursor", quarantine.Filter{JobName: []string{"job-3"}, After: cursor}),
		list("failure_class+status", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassExpired}, Status: []quarantine.Status{quarantine.StatusRefailed}}),
		count("job_name+source", quarantine.Filter{JobName: []string{"job-3"}, Source: []string{"seed-1"}}),
		list("status", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}}),
		list("status rare", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusRefailed}}),
		list("status+cursor", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}, After: cursor}),
		list("owner", quarantine.Filter{Owner: []string{"team-2"}}),
		list("source", quarantine.Filter{Source: []string{"seed-1"}}),
		list("idempotency_key", quarantine.Filter{IdempotencyKey: []string{"idem-777"}}),
		list("queue+status", quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}}),
		list("two queues", quarantine.Filter{Queue: []string{"queue-03", "queue-04"}}),
		list("failed range", quarantine.Filter{FailedAfter: cursor.FailedAt.Add(-time.Hour), FailedBefore: cursor.FailedAt}),
		{"text window", first(postgres.WindowQuery(quarantine.Filter{Text: "timeout", Queue: []string{"queue-03"}})),
			second(postgres.WindowQuery(quarantine.Filter{Text: "timeout", Queue: []string{"queue-03"}}))},
		{"text window boundary", first(postgres.BoundaryQuery(quarantine.Filter{Text: "timeout", After: cursor})),
			second(postgres.BoundaryQuery(quarantine.Filter{Text: "timeout", After: cursor}))},
		count("no filter", quarantine.Filter{}),
		count("status", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}}),
		count("queue", quarantine.Filter{Queue: []string{"queue-03"}}),
		{"oldest quarantined", postgres.OldestQuery, nil},
		{"sample arc", first(postgres.ArcQuery(quarantine.Filter{}, "", "")), second(postgres.ArcQuery(quarantine.Filter{}, "", ""))},
		{"sample arc queue+status", first(postgres.ArcQuery(quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}}, "", "")),
			second(postgres.ArcQuery(quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}}, "", ""))},
		{"sample arc of a fingerprint", first(postgres.ArcQuery(quarantine.Filter{}, "fingerprint", "x")), second(postgres.ArcQuery(quarantine.Filter{}, "fingerprint", "x"))},
		{"groups", first(postgres.GroupsQuery(quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}})),
			second(postgres.GroupsQuery(quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}}))},
		{"refail lock", postgres.LockReplayedSQL, []any{[]string{"idem-1", "idem-2"}}},
		{"purge", postgres.PurgeSelect(quarantine.StatusReplayed), []any{cursor.FailedAt, 100}},
		{"list rare status", first(postgres.ListQuery(quarantine.Filter{Status: []quarantine.Status{quarantine.StatusRefailed}})),
			second(postgres.ListQuery(quarantine.Filter{Status: []quarantine.Status{quarantine.StatusRefailed}}))},
	}
}

func first(q string, _ []any) string { return q }
func second(_ string, a []any) []any { return a }

// seqScans returns the relations that plan (EXPLAIN FORMAT JSON output)
// scans sequentially.
func seqScans(plan []byte) ([]string, error) {
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &doc); err != nil {
		return nil, err
	}
	var out []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Node Type"] == "Seq Scan" {
			out = append(out, fmt.Sprint(n["Relation Name"]))
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					walk(m)
				}
			}
		}
	}
	for _, d := range doc {
		walk(d.Plan)
	}
	return out, nil
}

// TestPlansUseIndexes seeds 20k messages, analyzes them, and checks with
// EXPLAIN (planner settings untouched) that no list, count or oldest
// query scans messages or payload_versions sequentially.
func TestPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	seed(t, s, 20_000)
	for _, q := range planQueries() {
		var plan []byte
		if err := s.Pool().QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+q.sql, q.args...).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		scans, err := seqScans(plan)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for _, rel := range scans {
			if rel == "messages" || rel == "payload_versions" {
				t.Errorf("%s: the plan scans %s sequentially:\n%s", q.name, rel, plan)
			}
		}
	}
}

// BenchmarkExplain prints (to stdout: benchmark logs are cut short
// without -v) the EXPLAIN ANALYZE plan and timing of
// every plan query, and the time ListMessages takes for a few text
// searches, on QUARANTINE_BENCH_ROWS (default 1,000,000) messages seeded
// once per machine in the persistent schema bench_<rows>. The loop then
// measures OldestQuarantined, which the age alarms call on every
// evaluation. Run by make bench.
func BenchmarkExplain(b *testing.B) {
	rows := benchRows(b)
	s := benchStore(b, rows)
	for _, q := range planQueries() {
		plan := explainAnalyze(b, s, q.sql, q.args)
		fmt.Printf("== %s on %d rows ==\n%s\n\n", q.name, rows, plan)
		if strings.Contains(plan, "Seq Scan on messages") {
			b.Errorf("%s: sequential scan of messages", q.name)
		}
	}
	// Text search as ListMessages runs it (window first, indexes after).
	for _, term := range []string{"upstream timeout", "sku-42 ", "idem-123", "no such thing at all"} {
		for _, f := range []quarantine.Filter{{Text: term}, {Text: term, Queue: []string{"queue-03"}}} {
			t0 := time.Now()
			p, err := s.ListMessages(b.Context(), f)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Printf("ListMessages text %q queue %v: %d messages in %v\n", term, f.Queue, len(p.Messages), time.Since(t0))
		}
	}
	// The reads of the index audit that walked or scanned (docs/postgresql.md),
	// as the store runs them: p50 of 20 calls after 3.
	for _, r := range auditReads() {
		ds := make([]time.Duration, 23)
		for i := range ds {
			t0 := time.Now()
			if err := r.read(b.Context(), s); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			ds[i] = time.Since(t0)
		}
		ds = ds[3:]
		slices.Sort(ds)
		fmt.Printf("%s: p50 %v, max %v (20 calls)\n", r.name, ds[len(ds)/2], ds[len(ds)-1])
	}
	for b.Loop() {
		if _, err := s.OldestQuarantined(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// auditReads are the store's reads behind the plans of planQueries that
// the index audit found above 100 ms at 1M, and their neighbours.
func auditReads() []struct {
	name string
	read func(context.Context, *postgres.Store) error
} {
	list := func(f quarantine.Filter) func(context.Context, *postgres.Store) error {
		return func(ctx context.Context, s *postgres.Store) error { _, err := s.ListMessages(ctx, f); return err }
	}
	count := func(f quarantine.Filter) func(context.Context, *postgres.Store) error {
		return func(ctx context.Context, s *postgres.Store) error { _, err := s.CountByQueue(ctx, f); return err }
	}
	type r = struct {
		name string
		read func(context.Context, *postgres.Store) error
	}
	return []r{
		{"ListMessages failure_class+rare status (none match)", list(quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassExpired}, Status: []quarantine.Status{quarantine.StatusRefailed}})},
		{"ListMessages failure_class+status", list(quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassExhausted}, Status: []quarantine.Status{quarantine.StatusDiscarded}})},
		{"ListMessages owner+rare status", list(quarantine.Filter{Owner: []string{"team-2"}, Status: []quarantine.Status{quarantine.StatusDiscarded}})},
		{"CountByQueue job_name+source", count(quarantine.Filter{JobName: []string{"job-3"}, Source: []string{"seed-1"}})},
		{"CountByQueue source", count(quarantine.Filter{Source: []string{"seed-1"}})},
		{"CountByQueue source+owner+status", count(quarantine.Filter{Source: []string{"seed-1"}, Owner: []string{"team-2"}, Status: []quarantine.Status{quarantine.StatusQuarantined}})},
	}
}

// explainAnalyze returns the text of EXPLAIN (ANALYZE, BUFFERS) of q.
func explainAnalyze(b *testing.B, s *postgres.Store, q string, args []any) string {
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	rs, err := s.Pool().Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		b.Fatalf("%s: %v", q, err)
	}
	var lines []string
	for rs.Next() {
		var l string
		if err := rs.Scan(&l); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rs.Err(); err != nil {
		b.Fatalf("%s: %v", q, err)
	}
	return strings.Join(lines, "\n")
}
