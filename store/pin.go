package store

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// PinAsync creates the batch r selects with s.CreateReplay, but answers as
// soon as a large selection's batch is written in the pinning state
// (pinning true): the pin goes on in the background, detached from ctx's
// cancellation, and GetReplay shows its progress (Total of PinTotal). A
// selection of one chunk answers when it is created, as CreateReplay.
// A pin that fails in the background removes its batch. Errors: those of
// CreateReplay, before the batch is pinning.
func PinAsync(ctx context.Context, s Replays, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (b *quarantine.ReplayBatch, pinning bool, err error) {
	type result struct {
		b   *quarantine.ReplayBatch
		err error
	}
	started := make(chan *quarantine.ReplayBatch, 1)
	done := make(chan result, 1)
	r.OnPinning = func(b *quarantine.ReplayBatch) { started <- b }
	go func() {
		b, err := s.CreateReplay(context.WithoutCancel(ctx), r, keyRule)
		done <- result{b, err}
	}()
	select {
	case b := <-started:
		return b, true, nil
	case res := <-done:
		return res.b, false, res.err
	}
}
