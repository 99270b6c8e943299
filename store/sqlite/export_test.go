package sqlite

// Test helpers for the external tests (conformance_test.go, bench_test.go),
// which live in package sqlite_test because storetest imports store, and
// store/open imports this package (open.Store).
var (
	OpenTest = openTest
	ExecRaw  = execRaw
)

// SetSampleExact lowers the thresholds of Sample for the conformance
// suite's rank-method cases.
func SetSampleExact(s *Store, exact, smallGroup int) { s.exact, s.smallGroup = exact, smallGroup }
