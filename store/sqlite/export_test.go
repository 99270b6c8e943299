package sqlite

// Test helpers for the external tests (conformance_test.go, bench_test.go),
// which live in package sqlite_test because storetest imports store, and
// store imports this package (store.Open).
var (
	OpenTest = openTest
	ExecRaw  = execRaw
)
