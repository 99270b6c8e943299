package collect

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// RekeyStore is what a re-key needs of the store.
type RekeyStore interface {
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)
	GetMessage(ctx context.Context, id string) (*quarantine.Message, error)
	RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error)
}

// RekeyRequest asks to apply the idempotency rules configured now to the
// stored messages matching Filter: counted only with DryRun, else
// applied, recorded by Actor with Reason. With ExpectChanged set, another
// number of changes is ECONFLICT and nothing changes (the count a dry run
// answered).
type RekeyRequest struct {
	Filter        quarantine.Filter
	DryRun        bool
	ExpectChanged *int
	Actor, Reason string
}

// rekeyPage is how many messages a re-key reads at once.
const rekeyPage = quarantine.MaxLimit

// rekeyShown is how many changes a result lists.
const rekeyShown = 50

// Rekey derives the key of every message matching r.Filter with the rules
// now (Key): a message whose key came with it (KeyRuleEnvelope) keeps it,
// as does one for which the rules find no key. Without r.DryRun it applies
// the changes through st.RekeyMessages. Errors: the store's, EINVALID for a
// bad filter, ECONFLICT when ExpectChanged does not hold.
func (p *Preparer) Rekey(ctx context.Context, st RekeyStore, r RekeyRequest) (quarantine.RekeyResult, error) {
	res := quarantine.RekeyResult{DryRun: r.DryRun, Changes: []quarantine.KeyChange{}}
	if !r.DryRun {
		if err := (&quarantine.Rekey{Actor: r.Actor, Reason: r.Reason}).Validate(); err != nil {
			return res, err
		}
	}
	var changes []quarantine.KeyChange
	f := r.Filter
	f.Limit, f.After = rekeyPage, nil
	for {
		page, err := st.ListMessages(ctx, f)
		if err != nil {
			return res, err
		}
		for _, m := range page.Messages {
			res.Matched++
			c, err := p.rekeyOne(ctx, st, m)
			if err != nil {
				return res, err
			}
			switch {
			case c.NewKey != "":
				changes = append(changes, c)
			case m.IdempotencyKey == "":
				res.StillMissing++
			default:
				res.Unchanged++
			}
		}
		if page.Next == nil {
			break
		}
		f.After = page.Next
	}
	res.Changed = len(changes)
	res.Changes = append(res.Changes, changes[:min(len(changes), rekeyShown)]...)
	if r.ExpectChanged != nil && *r.ExpectChanged != res.Changed {
		return res, quarantine.FieldErrorf(quarantine.ECONFLICT, "expect_changed",
			"the rules change the key of %d messages now, not the %d expected; nothing was changed", res.Changed, *r.ExpectChanged)
	}
	if r.DryRun || len(changes) == 0 {
		return res, nil
	}
	done, err := st.RekeyMessages(ctx, quarantine.Rekey{Changes: changes, Actor: r.Actor, Reason: r.Reason})
	if err != nil {
		return res, err
	}
	res.Stale = len(changes) - len(done)
	res.Changed = len(done)
	return res, nil
}

// rekeyOne returns the change the rules make to m's key: NewKey "" when
// they make none (Unchanged, or StillMissing when m has no key).
func (p *Preparer) rekeyOne(ctx context.Context, st RekeyStore, m *quarantine.Message) (quarantine.KeyChange, error) {
	c := quarantine.KeyChange{ID: m.ID, Queue: m.Queue, OldKey: m.IdempotencyKey, OldRule: m.KeyRule, NewRule: p.KeyRule(m.Queue)}
	if m.KeyRule == quarantine.KeyRuleEnvelope {
		return c, nil
	}
	payload := m.Payload
	if p.readsPayload(m.Queue) && payload == nil {
		full, err := st.GetMessage(ctx, m.ID)
		if err != nil {
			return c, err
		}
		payload = full.Payload
	}
	key := p.Key(m.Queue, m.Headers, payload)
	if key == "" || (key == m.IdempotencyKey && quarantine.SameKeyRule(c.NewRule, m.KeyRule)) {
		return c, nil
	}
	c.NewKey = key
	return c, nil
}

// readsPayload reports whether the rule for queue reads the payload.
func (p *Preparer) readsPayload(queue string) bool {
	_, fromPayload := p.PayloadKey(queue, nil)
	return fromPayload
}
