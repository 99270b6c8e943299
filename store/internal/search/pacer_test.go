package search

import (
	"testing"
	"time"
)

func TestPacerLetsIngestGoFirst(t *testing.T) {
	var p Pacer
	t0 := time.Unix(1000, 0)
	if p.Defer(t0) {
		t.Fatal("an idle store defers indexing")
	}
	at := t0.Add(MaxDefer / 2)
	p.Inserted(at)
	if !p.Defer(at.Add(Busy / 2)) {
		t.Fatal("indexing does not defer to an insert just made")
	}
	if p.Defer(at.Add(Busy)) {
		t.Fatal("indexing still defers once ingest has been quiet for Busy")
	}
	// Continuous ingest: deferred, but never longer than MaxDefer.
	last := at.Add(Busy)
	ran := 0
	for at := last; at.Before(last.Add(3 * MaxDefer)); at = at.Add(Busy / 5) {
		p.Inserted(at)
		if !p.Defer(at) {
			ran++
		}
	}
	if ran < 2 || ran > 4 {
		t.Fatalf("under continuous ingest the indexer ran %d times in 3×MaxDefer, want about 3", ran)
	}
}
