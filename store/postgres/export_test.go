package postgres

import "github.com/quarantine-dev/quarantine"

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

// CandidatesQuery exposes the window-size SQL to the EXPLAIN tests.
func CandidatesQuery(f quarantine.Filter) (string, []any) {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return candidatesQuery(&f)
}

// TextWindow is how many candidates the windowed text search tests.
const TextWindow = textWindow
