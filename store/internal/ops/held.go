package ops

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// Holds is what an operator action needs to know of replays in flight:
// a message held by a replay item (replays.InFlight) cannot be discarded
// or edited, whatever its status, since its publish may be under way.
// A store calls it after the statement that locked the messages (a
// statement of its own: on PostgreSQL it then sees a lease that locked
// them first and committed while it waited; replays.InFlight).
type Holds interface {
	// HeldBy returns, for each of ids held by a replay item in flight,
	// the id of its batch.
	HeldBy(ctx context.Context, ids []string) (map[string]string, error)
}

// markHeld sets HeldBy on the messages of sel that a replay holds (only
// those that are found and not discarded are looked up).
func markHeld(ctx context.Context, sel []quarantine.Selected, tx Holds) error {
	var ids []string
	for _, m := range sel {
		if m.Found && m.Status != quarantine.StatusDiscarded {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	held, err := tx.HeldBy(ctx, ids)
	if err != nil {
		return err
	}
	for i := range sel {
		sel[i].HeldBy = held[sel[i].ID]
	}
	return nil
}

// checkNotHeld returns ECONFLICT when a replay holds message id.
func checkNotHeld(ctx context.Context, id string, tx Holds) error {
	held, err := tx.HeldBy(ctx, []string{id})
	if err != nil {
		return err
	}
	if by := held[id]; by != "" {
		return quarantine.Errorf(quarantine.ECONFLICT, "the message is being replayed by batch %s: edit it once the replay is done", by)
	}
	return nil
}
