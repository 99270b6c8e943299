package sqlite_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/sqlite"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// serve lets the store's discard chunks grow past the default size.
var _ rules.ChunkSized = (*sqlite.Store)(nil)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return sqlite.OpenTest(t) },
		OpenClock: func(t *testing.T, now func() time.Time) store.Store {
			return sqlite.OpenTest(t, sqlite.WithClock(now))
		},
		Exec:          func(t *testing.T, s store.Store, q string) { sqlite.ExecRaw(t, s.(*sqlite.Store), q) },
		OpenUnindexed: func(t *testing.T) store.Store { return sqlite.OpenTest(t, sqlite.WithoutSearchIndexer()) },
		SetSampleExact: func(s store.Store, exact, smallGroup int) {
			sqlite.SetSampleExact(s.(*sqlite.Store), exact, smallGroup)
		},
	})
}
