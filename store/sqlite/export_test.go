package sqlite

import "github.com/quarantine-dev/quarantine/store/internal/sampling"

// Test helpers for the external tests (conformance_test.go, bench_test.go),
// which live in package sqlite_test because storetest imports store, and
// store/open imports this package (open.Store).
var (
	OpenTest = openTest
	ExecRaw  = execRaw
)

// SetSampleExact lowers the thresholds of Sample for the conformance
// suite's rank-method cases, and the prefix of the search queue a
// filtered arc reads first, so that those cases read past it too.
func SetSampleExact(s *Store, exact, smallGroup int) {
	s.sample, s.pendingPrefix = sampling.Limits{Exact: exact, SmallGroup: smallGroup}, 7
}
