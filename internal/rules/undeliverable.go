package rules

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// Undeliverable lists the items of batch b that would not be published:
// the skipped ones with their reason, and the pending ones whose message
// route refuses (route nil: none is refused). It reads every item of b and
// the message of each pending one.
func Undeliverable(ctx context.Context, st store.Store, route quarantine.RouteCheck, b *quarantine.ReplayBatch) (quarantine.Undeliverable, error) {
	out := quarantine.Undeliverable{Items: []quarantine.UndeliverableItem{}}
	add := func(it quarantine.ReplayItem, reason string) {
		out.Count++
		if len(out.Items) < quarantine.MaxUndeliverableShown {
			out.Items = append(out.Items, quarantine.UndeliverableItem{MessageID: it.MessageID, Queue: it.Queue, Reason: reason})
		}
	}
	outcomes := []quarantine.ItemOutcome{quarantine.ItemSkipped}
	if route != nil {
		outcomes = append(outcomes, quarantine.ItemPending)
	}
	f := quarantine.ReplayItemFilter{BatchID: b.ID, Outcome: outcomes, After: -1, Limit: quarantine.MaxLimit}
	for {
		items, more, err := st.ListReplayItems(ctx, f)
		if err != nil {
			return out, err
		}
		for _, it := range items {
			if it.Outcome == quarantine.ItemSkipped {
				add(it, it.Reason)
				continue
			}
			m, err := st.GetMessage(ctx, it.MessageID)
			if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
				add(it, "the message no longer exists")
				continue
			}
			if err != nil {
				return out, err
			}
			if err := route(b, m); err != nil {
				add(it, quarantine.ErrorMessage(err))
			}
		}
		if !more || len(items) == 0 {
			return out, nil
		}
		f.After = items[len(items)-1].Seq
	}
}
