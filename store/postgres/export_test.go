package postgres

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// ListQuery exposes the SQL of ListMessages to the EXPLAIN tests.
func ListQuery(f quarantine.Filter) (string, []any) {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return listQuery(&f)
}

// CountQuery exposes the SQL of CountByQueue to the EXPLAIN tests.
func CountQuery(f quarantine.Filter) (string, []any) {
	f.After, f.Limit = nil, 0
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return countQuery(&f)
}

// OldestQuery is the SQL of OldestQuarantined.
const OldestQuery = oldestQuarantined

// WindowQuery exposes the windowed text-search SQL to the EXPLAIN tests.
func WindowQuery(f quarantine.Filter) (string, []any) {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return windowQuery(&f)
}

// BoundaryQuery exposes the window-boundary SQL to the EXPLAIN tests.
func BoundaryQuery(f quarantine.Filter) (string, []any) {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return boundaryQuery(&f)
}

// TextWindow is how many candidates the windowed text search tests.
const TextWindow = textWindow

// SetSampleExact lowers the thresholds of Sample for the conformance
// suite's rank-method cases.
func SetSampleExact(s *Store, exact, smallGroup int) {
	s.sample = sampling.Limits{Exact: exact, SmallGroup: smallGroup}
}

// ArcQuery exposes the SQL of a sample's arc to the EXPLAIN tests.
func ArcQuery(f quarantine.Filter, col, val string) (string, []any) {
	f.Limit = 1
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return arcQuery(&f, col, val, ">=", 1<<40, 100)
}

// GroupsQuery exposes the SQL of Groups to the EXPLAIN tests.
func GroupsQuery(f quarantine.Filter) (string, []any) {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return groupsQuery(&f)
}

// PurgeSelect exposes the selection of PurgePayloads.
func PurgeSelect(st quarantine.Status) string { return purgeSelect(st) }

// LockReplayedSQL is the lock of the re-failure link.
const LockReplayedSQL = lockReplayedSQL

// SearchCatchUp is the longest queue a search indexes by itself.
const SearchCatchUp = searchCatchUp

// WriteDocsSQL is the statement the search indexer writes documents with.
const WriteDocsSQL = writeDocs

// ProbeTrigrams is the trigram choice of a probe of text among docs
// documents.
func ProbeTrigrams(ctx context.Context, s *Store, text string, docs float64) ([]string, error) {
	return s.probeTrigrams(ctx, search.Fold(text), docs)
}
