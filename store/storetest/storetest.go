package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// Harness gives the suite a fresh, migrated, empty store per call, and raw
// SQL access for tamper tests.
type Harness struct {
	// Open returns a fresh isolated store, migrated and empty. The harness
	// closes it through t.Cleanup.
	Open func(t *testing.T) store.Store
	// Exec runs literal SQL on that store's database, bypassing any
	// append-only guard (the postgres harness disables its trigger). It
	// fails t on error.
	Exec func(t *testing.T, s store.Store, sql string)
	// SetSampleExact, when set, lowers the size up to which s samples a
	// set exactly (exact) and a group of a stratified sample exactly
	// (smallGroup), so that small sets exercise the rank method.
	SetSampleExact func(s store.Store, exact, smallGroup int)
	// OpenClock is Open with the store's clock set to now (replay leases,
	// drafts and token buckets are tested against a clock the test moves).
	OpenClock func(t *testing.T, now func() time.Time) store.Store
	// OpenUnindexed, when set, is Open without the store's background
	// search indexer: messages are indexed only when the test calls
	// IndexSearch (the store is an Indexer).
	OpenUnindexed func(t *testing.T) store.Store
}

// Run runs the whole conformance suite against the stores h opens. Every
// subtest is parallel and opens its own store.
func Run(t *testing.T, h Harness) {
	runParallel(t, withKeptCountsChecked(h), []subtest{
		{"InsertBatch", testInsertBatch},
		{"GetMessage", testGetMessage},
		{"MessageOwners", testMessageOwners},
		{"NotFound", testNotFound},
		{"PayloadVersions", testPayloadVersions},
		{"ListMessages", testListMessages},
		{"Search", testSearch},
		{"CountByQueue", testCountByQueue},
		{"OldestQuarantined", testOldestQuarantined},
		{"Audit", testAudit},
		{"AuditTamper", testAuditTamper},
		{"AuditKnownAnswers", testAuditKnownAnswers},
		{"Tokens", testTokens},
		{"Hostile", testHostile},
		{"Schema", testSchema},
		{"EditPayload", testEditPayload},
		{"Discard", testDiscard},
		{"Rekey", testRekey},
		{"RefailLink", testRefailLink},
		{"Sample", testSample},
		{"Groups", testGroups},
		{"QueueStats", testQueueStats},
		{"Histogram", testHistogram},
		{"InflowCounters", testInflowCounters},
		{"AgeHistory", testAgeHistory},
		{"PurgePayloads", testPurgePayloads},
		{"HostileOperations", testHostileOperations},
		{"Replay", testReplay},
		{"MessageReplays", testMessageReplays},
		{"ReplayLease", testReplayLease},
		{"ReplayTokens", testReplayTokens},
		{"ReplayGuards", testReplayGuards},
		{"ReplaySchedule", testReplaySchedule},
		{"Alarms", testAlarms},
		{"Sessions", testSessions},
	})
}

// subtest is a named test of the suite.
type subtest struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// runParallel runs each of tests as a parallel subtest of t against h.
func runParallel(t *testing.T, h Harness, tests []subtest) {
	for _, st := range tests {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.fn(t, h)
		})
	}
}

// wantCode fails t unless err carries the code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := quarantine.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
}

// wantOK fails t on any error.
func wantOK(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// notInternal fails t when err is EINTERNAL: hostile input must be stored
// or refused, never crash the store.
func notInternal(t *testing.T, err error, what string) {
	t.Helper()
	if quarantine.ErrorCode(err) == quarantine.EINTERNAL {
		t.Fatalf("%s: EINTERNAL: %v", what, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
