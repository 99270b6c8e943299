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
	p.Begin(at)
	if !p.Defer(at.Add(Busy / 2)) {
		t.Fatal("indexing does not defer to an insert under way")
	}
	p.End(at.Add(Busy / 2))
	if p.Defer(at.Add(Busy / 2)) {
		t.Fatal("indexing still defers once the insert is over")
	}
	// Inserts back to back (a collector's commits overlap): deferred, but
	// never longer than MaxDefer.
	last := at.Add(Busy)
	p.Begin(last)
	ran := 0
	for at := last; at.Before(last.Add(3 * MaxDefer)); at = at.Add(Busy / 5) {
		p.End(at)
		p.Begin(at)
		if !p.Defer(at) {
			ran++
			p.Indexed(at, at)
		}
	}
	if ran < 2 || ran > 4 {
		t.Fatalf("under continuous ingest the indexer ran %d times in 3×MaxDefer, want about 3", ran)
	}
}

// Between inserts the indexer takes the writer, resting after each pass
// so that it holds it at most Share of the time (it used to take one pass
// per MaxDefer while inserts kept coming: 4% here).
func TestPacerIndexesBetweenInserts(t *testing.T) {
	var p Pacer
	now := time.Unix(2000, 0)
	end, next := now.Add(10*time.Second), now
	const pass, insert, every = 40 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond
	var indexing time.Duration
	for now.Before(end) {
		// A steady ingest: an insert of 10 ms every 100 ms, once the
		// writer is free; the indexer looks again when Run's retry says.
		if !now.Before(next) {
			p.Begin(now)
			now = now.Add(insert)
			p.End(now)
			next = next.Add(every)
			continue
		}
		if p.Defer(now) {
			if now = now.Add(p.retry(now)); now.After(next) {
				now = next
			}
			continue
		}
		p.Indexed(now, now.Add(pass))
		now = now.Add(pass)
		indexing += pass
	}
	if share := indexing.Seconds() / 10; share < 0.35 || share > Share {
		t.Fatalf("the indexer held the writer %.0f%% of the time, want about %.0f%% of the 90%% inserts leave", 100*share, 100*Share*0.9)
	}
}

// One inserter writing back to back (a gap of 5 ms between inserts of
// 95 ms) saturates the writer: the indexer leaves it the gaps too, and
// takes one pass per MaxDefer, as under overlapping inserts.
func TestPacerLeavesASaturatedWriterItsGaps(t *testing.T) {
	var p Pacer
	now := time.Unix(3000, 0)
	ran := 0
	for end := now.Add(5 * time.Second); now.Before(end); {
		p.Begin(now)
		now = now.Add(95 * time.Millisecond)
		p.End(now)
		now = now.Add(time.Millisecond)
		if !p.Defer(now) {
			ran++
			p.Indexed(now, now.Add(40*time.Millisecond))
			now = now.Add(40 * time.Millisecond)
		}
		now = now.Add(4 * time.Millisecond)
	}
	// The first window (1 s) is not known to be saturated yet.
	if ran > 5+int(LoadWindow/(140*time.Millisecond)) || ran < 4 {
		t.Fatalf("the indexer ran %d times in 5 s of saturated ingest, want about one a second", ran)
	}
}
