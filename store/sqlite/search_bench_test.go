package sqlite_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// BenchmarkSearchIndexer measures how fast the background indexer can
// make messages searchable: 20,000 messages with distinct 1 KiB payloads
// (QUARANTINE_BENCH_INSERTS overrides the count), then IndexSearch until
// the queue is empty. Run with -benchtime=1x.
func BenchmarkSearchIndexer(b *testing.B) {
	s := sqlite.OpenTest(b, sqlite.WithoutSearchIndexer())
	storetest.BenchSearchIndexer(b, s, storetest.EnvCount(b, "QUARANTINE_BENCH_INSERTS", 20_000))
}
