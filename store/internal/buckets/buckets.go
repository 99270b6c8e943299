// Package buckets holds the replay rate buckets' store methods that do
// not depend on SQL, shared by both stores: validating the buckets,
// answering what needs no transaction, and otherwise taking the grant
// in one transaction of the store (a Take).
package buckets

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// Take grants from every bucket of bs (validated, in key order) what
// reserve grants, in one transaction of a store named what: how many,
// when they are due (the first slot, for slots), or, when none, how long
// until one can be.
type Take func(ctx context.Context, what string, bs []quarantine.RateBucket, reserve replays.Reserver) (n int, due time.Time, wait time.Duration, err error)

// Tokens takes up to want tokens from every bucket at once through take;
// see store.Replays TakeReplayTokens. Errors: EINVALID for a bucket
// without key or positive rate, take's.
func Tokens(ctx context.Context, buckets []quarantine.RateBucket, want int, take Take) (int, time.Duration, error) {
	bs, err := replays.Buckets(buckets)
	switch {
	case err != nil:
		return 0, 0, err
	case want <= 0:
		return 0, 0, nil
	case len(bs) == 0:
		return want, 0, nil
	}
	n, _, wait, err := take(ctx, "take replay tokens", bs, replays.ReserveTokens(want, 0))
	if err != nil {
		return 0, 0, err
	}
	return n, wait, nil
}

// Slots grants up to want publish slots from every bucket at once
// through take (replays.ReserveSlots): the first at least lead after
// now, every one at most ahead after now; see store.Replays
// TakeReplaySlots. Without buckets (or want) every slot is due now.
// Errors: EINVALID for a bucket without key or positive rate, take's.
func Slots(ctx context.Context, buckets []quarantine.RateBucket, want int, lead, ahead time.Duration, now func() time.Time, take Take) (int, time.Time, time.Duration, error) {
	bs, err := replays.Buckets(buckets)
	switch {
	case err != nil:
		return 0, time.Time{}, 0, err
	case want <= 0 || len(bs) == 0:
		return max(want, 0), now(), 0, nil
	}
	n, first, wait, err := take(ctx, "take replay slots", bs, replays.ReserveSlots(want, lead, ahead))
	if err != nil {
		return 0, time.Time{}, 0, err
	}
	return n, first, wait, nil
}
