package sqlite

import (
	"slices"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// The arcs of a sample read the side index in key order (sample_ranks,
// or fingerprint_ranks for a fingerprint's group: migration 0013),
// looking messages up by id only to test a filter; the pending half
// reads the queue (its entries' ranks) and looks their messages up by id
// only to test a filter, never through a filter's index (which would
// read every message of the filter); then the rows of the k winners are
// read by id.
func TestSampleArcPlans(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	has := func(plan []string, prefix string) bool {
		return slices.ContainsFunc(plan, func(d string) bool { return strings.HasPrefix(d, prefix) })
	}
	byID := "SEARCH m USING INDEX sqlite_autoindex_messages_1 (id=?)"
	for name, f := range map[string]quarantine.Filter{
		"none":          {},
		"status":        {Status: []quarantine.Status{quarantine.StatusQuarantined}},
		"queue":         {Queue: []string{"a", "b"}},
		"queue+status":  {Queue: []string{"a"}, Status: []quarantine.Status{quarantine.StatusQuarantined}},
		"failure_class": {FailureClass: []quarantine.FailureClass{quarantine.ClassExhausted}},
	} {
		for _, col := range []string{"fingerprint", "queue"} {
			r := sampleReader{f: f, col: col}
			for _, key := range []string{"", "k"} {
				for _, wrapped := range []bool{false, true} {
					q, args := r.sideArc(key, wrapped, 5, 100)
					side := queryPlan(t, s, q, args...)
					index := "SEARCH x USING PRIMARY KEY (sample_rank"
					if key != "" && col == "fingerprint" {
						index = "SEARCH x USING PRIMARY KEY (fingerprint=? AND sample_rank"
					}
					if !has(side, index) || sorts(side) || fullScan(side) {
						t.Errorf("%s by %s key %q wrapped %v: side arc plan %v, want %s… in order", name, col, key, wrapped, side, index)
					}
					q, args = r.pendingArc(key, wrapped, 5, 100)
					pending := queryPlan(t, s, q, args...)
					lookup := key != "" || name != "none"
					queue := "SCAN search_pending" // the queue alone
					if lookup {
						queue = "SCAN p" // the queue, then its messages
					}
					if !has(pending, queue) || has(pending, byID) != lookup || fullScan(pending) {
						t.Errorf("%s by %s key %q wrapped %v: pending arc plan %v, want the queue read, then messages by id for a filter only", name, col, key, wrapped, pending)
					}
					q, args = r.arcQuery(key, wrapped, 5, 100)
					arc := queryPlan(t, s, q, args...)
					if !has(arc, index) || !has(arc, queue) || arc[len(arc)-1] != byID || fullScan(arc) {
						t.Errorf("%s by %s key %q wrapped %v: arc plan %v, want both halves, then the winners' rows by id", name, col, key, wrapped, arc)
					}
				}
			}
		}
	}
}
