package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// queryPlan returns the EXPLAIN QUERY PLAN details of q.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fullScan reports a step that reads the messages table without an index.
func fullScan(plan []string) bool {
	for _, d := range plan {
		if (strings.HasPrefix(d, "SCAN m") || strings.HasPrefix(d, "SCAN messages") || strings.HasPrefix(d, "SCAN o")) &&
			!strings.Contains(d, "USING INDEX") && !strings.Contains(d, "USING COVERING INDEX") {
			return true
		}
	}
	return false
}

func sorts(plan []string) bool {
	for _, d := range plan {
		if strings.Contains(d, "TEMP B-TREE") {
			return true
		}
	}
	return false
}

func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cursor := &quarantine.Cursor{FailedAt: at, ID: quarantine.NewID(at)}
	filters := map[string]quarantine.Filter{
		"none":            {},
		"queue":           {Queue: []string{"orders"}},
		"job_name":        {JobName: []string{"charge"}},
		"failure_class":   {FailureClass: []quarantine.FailureClass{quarantine.ClassExhausted}},
		"status":          {Status: []quarantine.Status{quarantine.StatusQuarantined}},
		"owner":           {Owner: []string{"team-a"}},
		"source":          {Source: []string{"src"}},
		"idempotency_key": {IdempotencyKey: []string{"k"}},
		"fingerprint":     {Fingerprint: []string{"f"}},
		"failed_after":    {FailedAfter: at},
		"failed_before":   {FailedBefore: at},
		"text":            {Text: "timeout"},
		"queue+status":    {Queue: []string{"orders"}, Status: []quarantine.Status{quarantine.StatusQuarantined}},
	}
	for name, f := range filters {
		f.Limit = 50
		for _, c := range []*quarantine.Cursor{nil, cursor} {
			f.After = c
			q, args := listQuery(f)
			plan := queryPlan(t, s, q, args...)
			if fullScan(plan) {
				t.Errorf("list %s (cursor %v): full scan: %v", name, c != nil, plan)
			}
			if sorts(plan) {
				t.Errorf("list %s (cursor %v): sorts instead of reading in index order: %v", name, c != nil, plan)
			}
		}
		q, args := countQuery(f)
		if plan := queryPlan(t, s, q, args...); fullScan(plan) {
			t.Errorf("count %s: full scan: %v", name, plan)
		}
	}
	plan := queryPlan(t, s, oldestQuery)
	if fullScan(plan) {
		t.Errorf("oldest: full scan: %v", plan)
	}
	t.Logf("oldest plan: %v", plan)
	q, args := countQuery(quarantine.Filter{})
	t.Logf("count plan: %v", queryPlan(t, s, q, args...))
}

// An insert looks up the replayed messages holding its keys by the keys'
// index, not by the status index: with a million quarantined messages the
// status index made each ingest read all of them, holding the writer.
func TestLockReplayedReadsByKey(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	plan := queryPlan(t, s, lockReplayedSQL, `["k1","k2"]`)
	for _, d := range plan {
		if strings.HasSuffix(d, " m") || strings.Contains(d, "messages_status") || strings.Contains(d, "messages_queue_status") ||
			strings.HasPrefix(d, "SEARCH m") && !strings.Contains(d, "messages_idempotency_key") {
			t.Errorf("lockReplayed reads messages otherwise than by key: %v", plan)
		}
	}
	t.Logf("plan: %v", plan)
}

// TestAuditBySubjectPlan: a message's history (the audit log by subject)
// reads the subject index and, for a message discarded by a chunk, the
// one event of its discard_seq by its seq, never the whole log; without a
// discard_seq, in the index's order.
func TestAuditBySubjectPlan(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	id := quarantine.NewID(time.Now())
	for _, f := range []quarantine.AuditFilter{{Subject: id, Limit: 50}, {Subject: id, Action: quarantine.ActionDiscard, Limit: 20},
		{Subject: id, Seq: 1000, Limit: 50}} {
		for _, seq := range []int64{0, 1234} {
			q, args := auditQuery(f, seq)
			plan := queryPlan(t, s, q, args...)
			for _, d := range plan {
				if strings.HasPrefix(d, "SCAN audit_log") && !strings.Contains(d, "INDEX") {
					t.Errorf("audit by subject %+v, discard_seq %d: full scan: %v", f, seq, plan)
				}
			}
			if seq == 0 && sorts(plan) {
				t.Errorf("audit by subject %+v: sorts instead of reading in index order: %v", f, plan)
			}
			t.Logf("plan %+v, discard_seq %d: %v", f, seq, plan)
		}
	}
}
