package replays

import "github.com/quarantine-dev/quarantine"

// The in-flight state of a message lives on its replay item alone: the
// lease of an item does not change its message's row, and the record of
// its outcome changes it once (quarantined -> replayed, say). A message
// is held by the batch whose item for it is InFlight: leased at least
// once and not yet recorded (a lease expired by a crash included: the
// publish may have happened, and only the same batch's next lease
// takes the item again; a cancel ends the hold). Two batches may pin the
// same message, and the one that leases it first publishes it; the
// others skip it, as does a lease of a message discarded meanwhile.
//
// A lease, a discard and an edit each lock the message's row first, then
// look for holders in a later statement (InFlight). On PostgreSQL, at
// read committed, each statement reads a snapshot of its own: whichever
// of two such transactions locks the row second waits until the first
// commits, then sees the first one's item (a lease holds the item row
// it wrote until it commits) or the first one's status (a discard), and
// loses. SQLite has one writer. So a discard and a second batch can
// never both win against a publish. Messages that an older version
// moved to replaying are recorded and released as before.

// InFlight is the SQL condition on replay_items (unqualified columns) of
// an item that holds its message.
const InFlight = `outcome = 'pending' AND attempts > 0`

// HolderOutcomes is the SQL list of the outcomes of an item that holds
// (pending, leased before: attempts above 0) or has published its message,
// for the lookup of the batch a skipped item names.
const HolderOutcomes = `'pending', 'published', 'deduplicated', 'refailed'`

// Holders are the other batches found holding or having published the
// messages of a lease.
type Holders struct {
	// InFlight is the batch whose item holds each message in flight.
	InFlight map[string]string
	// Any is the batch that holds or published each message, the latest
	// first.
	Any map[string]string
}

// NewHolders returns empty Holders.
func NewHolders() Holders {
	return Holders{InFlight: map[string]string{}, Any: map[string]string{}}
}

// Add notes that batch holds (in flight when pending) or published
// message; rows added latest last.
func (h Holders) Add(message, batch string, pending bool) {
	if pending {
		h.InFlight[message] = batch
	}
	h.Any[message] = batch
}

// Skip is a leased item that cannot be published: it becomes skipped
// with Reason.
type Skip struct {
	Seq       int
	MessageID string
	Reason    string
}

// Claim decides, for items just leased, which items are skipped and which
// leases are kept. status holds the locked status of each message found;
// holders the other batches that hold or published them (for a
// quarantined message only one holding it in flight counts: a message
// replaying with no other holder is this item's own, moved by an older
// version).
func Claim(leases []quarantine.ReplayLease, status map[string]quarantine.Status, holders Holders) (skip []Skip, keep []quarantine.ReplayLease) {
	for _, l := range leases {
		id := l.Item.MessageID
		st, found := status[id]
		by := holders.Any[id]
		if st == quarantine.StatusQuarantined {
			by = holders.InFlight[id]
		}
		if why := quarantine.LeaseSkipReason(found, st, by); why != "" {
			skip = append(skip, Skip{Seq: l.Item.Seq, MessageID: id, Reason: why})
			continue
		}
		keep = append(keep, l)
	}
	return skip, keep
}
