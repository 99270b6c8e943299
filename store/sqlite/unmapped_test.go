package sqlite

import (
	"database/sql"
	"testing"
)

// The reads that walk much of the messages table (a pin's snapshot, the
// count that starts a discard) run without the memory map, and the
// connection goes back to the pool with its map as it was: a mapped walk
// of a million messages stayed resident in serve (791 MiB at its peak).
func TestReadUnmappedRestoresTheMap(t *testing.T) {
	s := openTest(t)
	s.r.SetMaxOpenConns(1) // the one connection readUnmapped borrows
	mapSize := func(q interface {
		QueryRow(string, ...any) *sql.Row
	}) int64 {
		t.Helper()
		var n int64
		if err := q.QueryRow("PRAGMA mmap_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := mapSize(s.r)
	if before == 0 {
		t.Fatal("the readers have no memory map to turn off")
	}
	err := s.readUnmapped(t.Context(), "test", func(tx *sql.Tx) error {
		if n := mapSize(tx); n != 0 {
			t.Errorf("inside readUnmapped mmap_size = %d, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := mapSize(s.r); after != before {
		t.Errorf("the connection came back with mmap_size %d, want %d", after, before)
	}
}
