package replays

import "github.com/quarantine-dev/quarantine"

// A message moves to replaying when an item of a batch is leased, not
// when the batch is created: two batches may pin the same message, and
// the one that leases it first publishes it. The lease and a discard both
// change the message's row, so they conflict there: one waits for the
// other and finds the status the other left (quarantine.LeaseSkipReason).

// HolderOutcomes is the SQL list of the outcomes of an item that holds
// (pending, leased before: attempts above 0) or has published its message,
// for the lookup of the batch a skipped item names.
const HolderOutcomes = `'pending', 'published', 'deduplicated', 'refailed'`

// Skip is a leased item that cannot be published: it becomes skipped
// with Reason.
type Skip struct {
	Seq       int
	MessageID string
	Reason    string
}

// Claim decides, for items just leased, which messages move to replaying
// (quarantined now), which items are skipped, and which leases are kept.
// status holds the locked status of each message found; by the other
// batch that holds or published a message (for a message not
// quarantined; "" or absent: none), so that a message replaying with no
// other holder is this item's own (leased before by it, or pinned before
// leases moved messages).
func Claim(leases []quarantine.ReplayLease, status map[string]quarantine.Status, by map[string]string) (move []string, skip []Skip, keep []quarantine.ReplayLease) {
	for _, l := range leases {
		id := l.Item.MessageID
		st, found := status[id]
		holder := by[id]
		if why := quarantine.LeaseSkipReason(found, st, holder == "", holder); why != "" {
			skip = append(skip, Skip{Seq: l.Item.Seq, MessageID: id, Reason: why})
			continue
		}
		if st == quarantine.StatusQuarantined {
			move = append(move, id)
		}
		keep = append(keep, l)
	}
	return move, skip, keep
}

// Unclaimed returns the ids of leased messages that are not quarantined:
// the ones whose holder a store looks up.
func Unclaimed(status map[string]quarantine.Status) []string {
	var out []string
	for id, st := range status {
		if st != quarantine.StatusQuarantined {
			out = append(out, id)
		}
	}
	return out
}
