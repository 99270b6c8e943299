package quarantine

import "time"

// States of a DiscardOperation.
const (
	// DiscardRunning: chunks remain; a serve process applies them (after a
	// crash, the next serve resumes it where the last committed chunk
	// left it).
	DiscardRunning = "running"
	// DiscardCompleted: every message of the set was discarded or skipped.
	DiscardCompleted = "completed"
	// DiscardFailed: a chunk failed for good (Error says why); the chunks
	// committed before it stay applied, the others were not started.
	DiscardFailed = "failed"
	// DiscardInterrupted is how a read shows a running operation that no
	// process has advanced for DiscardStaleAfter (its process died); it is
	// never stored: the next serve resumes it.
	DiscardInterrupted = "interrupted"
)

// ActionDiscardResume records the resume of a discard operation by an
// operator (POST /api/v1/discards/{id}/resume), subject the operation's
// id, with the state it was in and its counts then.
const ActionDiscardResume = "discard.resume"

// DiscardStaleAfter is how long a running discard operation may go
// without a committed chunk before reads show it interrupted.
const DiscardStaleAfter = time.Minute

// DiscardOperation is a discard by filter of any size, applied in chunks:
// each chunk is one transaction that marks its messages discarded,
// appends one message.discard event naming every message it discarded
// (DiscardChunkDetails; and a discard_refused per refusal), and advances the operation's counts, so that a crash
// leaves whole chunks applied and the operation resumable.
//
// The set is the messages that matched Filter when the operation started
// (a watermark of the insert order bounds it: messages stored later are
// never part of it), walked a chunk at a time in the store's order
// (newest first, by failed_at and id; an operation started by an earlier
// version of a store may go on by id), each
// message once. A message of the set that no
// longer matches when its chunk runs (its status moved, say) is left
// alone and counted in neither Discarded nor Skipped, so Discarded +
// Skipped may end below Matched.
type DiscardOperation struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	Actor      string     `json:"actor"`
	Reason     string     `json:"reason"`
	Matched    int64      `json:"matched"`
	Discarded  int64      `json:"discarded"`
	Skipped    int64      `json:"skipped"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	// Filter is the selection, already narrowed to the requester's
	// owners. Mark is the store's watermark of the insert order and
	// Cursor the last id a committed chunk covered ("" before the first).
	Filter Filter `json:"-"`
	Mark   string `json:"-"`
	Cursor string `json:"-"`
}

// Shown returns o as a reader sees it at now: a running operation with no
// chunk committed for DiscardStaleAfter is interrupted.
func (o DiscardOperation) Shown(now time.Time) DiscardOperation {
	if o.State == DiscardRunning && now.Sub(o.UpdatedAt) > DiscardStaleAfter {
		o.State = DiscardInterrupted
	}
	return o
}

// Done returns how many messages of the set were dealt with.
func (o DiscardOperation) Done() int64 { return o.Discarded + o.Skipped }

// ETA estimates the time left at now from the pace so far; 0 when it
// cannot tell (nothing done yet) or nothing is left.
func (o DiscardOperation) ETA(now time.Time) time.Duration {
	done, left := o.Done(), o.Matched-o.Done()
	if o.State != DiscardRunning || done <= 0 || left <= 0 {
		return 0
	}
	spent := now.Sub(o.StartedAt)
	return time.Duration(float64(spent) / float64(done) * float64(left)).Round(time.Second)
}

// CheckConfirmed checks the count a discard by filter matched against its
// expect_count: with one, another count is ECONFLICT; without one, more
// than confirmAbove messages (0: no threshold) is EUNPROCESSABLE naming
// expect_count, which must then be the count the operator previewed.
func (d *Discard) CheckConfirmed(matched int64, confirmAbove int) error {
	if d.ExpectCount != nil {
		if int64(*d.ExpectCount) != matched {
			return FieldErrorf(ECONFLICT, "expect_count",
				"the selection matches %d messages now, not the %d expected; nothing was discarded", matched, *d.ExpectCount)
		}
		return nil
	}
	if confirmAbove > 0 && matched > int64(confirmAbove) {
		return FieldErrorf(EUNPROCESSABLE, "expect_count",
			"the filter matches %d messages, more than %d: confirm with expect_count %d", matched, confirmAbove, matched)
	}
	return nil
}
