// Package fields holds what both stores' SQL makes of a
// quarantine.Filter's fields alike: which column each equality field
// tests, in which order, and which filters the failure groups (table
// failure_groups) answer. Each store writes the conditions in its own
// dialect.
package fields

import "github.com/quarantine-dev/quarantine"

// Eq is the condition that Column is one of Values (none: no
// condition).
type Eq struct {
	Column string
	Values []string
}

// Messages returns the equality conditions of f on messages (aliased
// m), in the order both stores write them.
func Messages(f *quarantine.Filter) []Eq {
	return []Eq{
		{"m.queue", f.Queue},
		{"m.job_name", f.JobName},
		{"m.failure_class", Strings(f.FailureClass)},
		{"m.status", Strings(f.Status)},
		{"m.owner", f.Owner},
		{"m.source", f.Source},
		{"m.idempotency_key", f.IdempotencyKey},
		{"m.fingerprint", f.Fingerprint},
	}
}

// Groupable reports whether failure_groups answers f: f names none of
// the fields a group does not keep (source, idempotency key, failure
// times, text).
func Groupable(f *quarantine.Filter) bool {
	return len(f.Source) == 0 && len(f.IdempotencyKey) == 0 && f.FailedAfter.IsZero() &&
		f.FailedBefore.IsZero() && f.Text == ""
}

// Groups returns the equality conditions of a groupable f on
// failure_groups aliased alias.
func Groups(f *quarantine.Filter, alias string) []Eq {
	return []Eq{
		{alias + ".queue", f.Queue},
		{alias + ".job_name", f.JobName},
		{alias + ".failure_class", Strings(f.FailureClass)},
		{alias + ".status", Strings(f.Status)},
		{alias + ".owner", f.Owner},
		{alias + ".fingerprint", f.Fingerprint},
	}
}

// Strings returns vs as strings (statuses, failure classes, states).
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
