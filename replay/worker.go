package replay

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/backoff"
)

// worker runs one batch in one engine until it is no longer running here.
type worker struct {
	e  *Engine
	id string
	// slotsTook follows how long this worker's takes of slots took (a
	// decaying maximum), waiting for the store included: no take starts
	// while an item holding a slot is due before it would return.
	slotsTook time.Duration
	// grantLag follows how long after the store granted slots (its
	// transaction's now) the grant reached this worker (a decaying
	// maximum): the lead its next takes ask for, so that the slots they
	// get are not already due when they return. It leaves out the wait
	// for the store (another engine's or worker's transaction, SQLite's
	// one writer), which a lead need not cover: the slots are granted
	// once that wait is over.
	grantLag time.Duration
	// records are closed when the records under way in the background
	// end, oldest first (each starts once the one before it ended): at
	// most two, one running and the next waiting for it (recordAsync).
	records []chan struct{}

	// The breaker judges what was published since this worker started (a
	// resume after a breaker pause starts a new worker, so the operator's
	// resume is not undone at once by the same old re-failures).
	breakerBase, breakerRefailBase int
	failures                       int // consecutive transient publish failures
	// leased is how many items the worker's next lease asks for at most:
	// firstLease at its start, doubled by every lease up to the chunk.
	leased int
}

// buckets are the shared rate buckets of batch b publishing to the
// destination label: they hand out its slots (TakeReplaySlots), whose
// schedule keeps no burst (see late).
func buckets(b *quarantine.ReplayBatch, label string) []quarantine.RateBucket {
	return []quarantine.RateBucket{
		{Key: "batch:" + b.ID, Rate: b.Rate, Burst: 1},
		{Key: destBucket(label), Rate: b.Rate, Burst: 1},
	}
}

// slotTime is the slot of the k-th item of a grant of slots whose first
// is first, at rate (the stores' replays.SlotTime).
func slotTime(first time.Time, rate float64, k int) time.Time {
	return first.Add(time.Duration(math.Round(float64(k) / rate * 1e9)))
}

// late is how long after its slot an item of b may still be published;
// one later is given a new slot. Slots are 1/rate apart at least, so a
// closed interval of length 1 + l holds at most floor(rate × (1 + l)) + 1
// of them: at most rate + burst while l < burst/rate. Half of that is
// the publisher's (the wake-up after the slot, the publish call), half is
// left for the way to the consumer (the broker, the consumer's own
// delays): at most rate + burst arrive in any second where they are
// consumed, as long as their transit varies by less than that half. At
// least 2 ms (a timer's wake-up), which only a burst of one at a rate
// above 250/s would need more than.
func late(b *quarantine.ReplayBatch) time.Duration {
	return max(2*time.Millisecond, time.Duration(float64(max(b.Burst, 1))/b.Rate/2*float64(time.Second)))
}

// lead is how long after a take's grant (its transaction's now) its
// slots should begin, when the schedule is idle: a little more than
// grants took lately to come back (took, a decaying maximum), at most
// maxLead.
func lead(took time.Duration) time.Duration {
	return min(took+took/4, maxLead)
}

// maxLead caps lead. It is also the lead of a destination no publish
// has answered yet, whose publisher may connect first (unless it is a
// Connector, connected before the take).
const maxLead = 100 * time.Millisecond

// maxGather is how long after its slot an item waits at most for the
// items due after it, to be published with them: the arrivals stay
// that close to the schedule.
const maxGather = 5 * time.Millisecond

// observe folds a call's duration d into the decaying maximum *took.
func observe(took *time.Duration, d time.Duration) {
	*took = max(d, *took-*took/8)
}

func (w *worker) run(ctx context.Context) {
	defer w.awaitRecord()
	st := w.e.cfg.Store
	var b *quarantine.ReplayBatch
	var readAt time.Time
	for ctx.Err() == nil {
		// The batch (its state and counts) is read again at most every
		// refresh while items keep coming, and at once when they stop
		// (the lease checks the state itself).
		fresh := false
		if b == nil || time.Since(readAt) >= refresh {
			nb, err := st.GetReplay(ctx, w.id)
			if err != nil {
				if quarantine.ErrorCode(err) == quarantine.ENOTFOUND {
					return
				}
				w.e.log.Warn("cannot read replay", "replay", w.id, "err", err)
				backoff.Sleep(ctx, w.e.cfg.Poll)
				continue
			}
			b, readAt, fresh = nb, time.Now(), true
		}
		if b.State != quarantine.ReplayRunning {
			return
		}
		if fresh && w.breaker(ctx, b) {
			return
		}
		maxSeq := 0
		if b.Canary > 0 && (b.CanaryVerdict == quarantine.CanaryPending || b.CanaryVerdict == quarantine.CanaryObserving) {
			if !fresh {
				b = nil // the canary decides on what the store holds now
				continue
			}
			var wait time.Duration
			var stop bool
			maxSeq, wait, stop = w.canary(ctx, b)
			if stop {
				return
			}
			if wait > 0 {
				backoff.Sleep(ctx, min(wait, w.e.cfg.Poll))
				b = nil
				continue
			}
		}
		if b.Counts[quarantine.ItemPending] == 0 {
			if !fresh {
				b = nil
				continue
			}
			w.e.system(ctx, w.id, quarantine.ReplayActComplete, "every item has an outcome")
			return
		}
		w.leased = max(w.leased, firstLease)
		leases, err := st.LeaseReplayItems(ctx, w.id, w.e.cfg.Owner, min(chunk(b), w.leased), w.e.cfg.Lease, maxSeq)
		if err != nil {
			if ctx.Err() == nil {
				w.e.log.Warn("cannot lease replay items", "replay", w.id, "err", err)
			}
			backoff.Sleep(ctx, w.e.cfg.Poll)
			continue
		}
		if len(leases) == 0 {
			// Another worker or engine holds the rest, the canary's
			// items are all out, or the batch changed: look again soon,
			// not so soon that empty leases load the store.
			if !fresh {
				b = nil
				continue
			}
			backoff.Sleep(ctx, max(w.e.cfg.Poll/4, minIdle))
			b = nil
			continue
		}
		w.leased = min(2*w.leased, MaxChunk)
		if retry := w.publish(ctx, b, leases); retry > 0 {
			backoff.Sleep(ctx, retry)
			b = nil
		}
	}
}

// firstLease is the most items a worker's first lease asks for: the
// first leases of a batch's workers run at once, and the first publish
// waits for one of them; each next lease asks for twice as many, up to
// the chunk.
const firstLease = 250

// refresh is how often a worker reads its batch again while publishing.
const refresh = time.Second

// minIdle is the least a worker that leased nothing waits before it
// tries again.
const minIdle = 50 * time.Millisecond

// chunk is how many items to lease at once: what the batch may publish in
// about a fifth of a second (its slots; the burst is not drawn on), at
// most MaxChunk. A worker leases a chunk, then takes the slots of its
// items at once (TakeReplaySlots) and publishes each at its slot: taken
// once the lease and the read of its messages are done, however long
// those took, the slots are not due yet. The engine's other workers
// lease and take theirs meanwhile, so the schedule, shared by every
// engine, goes on while one chunk is published.
func chunk(b *quarantine.ReplayBatch) int {
	n := int(b.Rate / 5)
	n = max(n, 1)
	return min(n, MaxChunk)
}

// recordEvery is how many of the items a worker published it records at
// once, at least (in the background, one record at a time, and what is
// left at the end of a chunk's destination): a quarter of the burst, so
// that a process stopped or killed leaves about the burst published and
// not recorded (its two workers', each with one record under way and
// the next one's items), to be published again once their leases end;
// at most a part (maxPart), so that the last record of an unthrottled
// batch is not a whole chunk's, begun only once its last item is
// confirmed.
// Items published while a record is under way wait for the next one: a
// store slower than that records larger batches, rather than hold the
// publishes back past their slots.
func recordEvery(b *quarantine.ReplayBatch) int { return max(min(b.Burst/4, maxPart), 1) }

// minAhead is how long after a take of slots starts the last slot of
// its chunk may be at least. A chunk whose slots were taken before a
// pause or a cancel is published at most about ahead after it, and the
// slots of a chunk not published (a shutdown, a crash, a destination
// asking to wait) are lost, never given back (that could let a later
// chunk above the rate): at most that long of the rate.
const minAhead = 200 * time.Millisecond

// ahead is how long after a take of slots starts the last slot of its
// chunk may be: two chunks' time after the lead, at least minAhead. A
// worker whose chunk is leased then holds the slots after the chunk
// being published, and the next lease has a chunk's time before the
// schedule would go idle; a worker whose chunk finds no slot within that
// waits for one, its chunk leased.
func ahead(b *quarantine.ReplayBatch, lead time.Duration) time.Duration {
	return max(minAhead, lead+2*chunkTime(b))
}

// chunkTime is the time between the first and the last slot of a chunk
// of b.
func chunkTime(b *quarantine.ReplayBatch) time.Duration {
	if b.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(chunk(b)-1) / b.Rate * float64(time.Second))
}

// breaker pauses b when its re-failure ratio passed the threshold; true
// when it did (or the batch is no longer running).
func (w *worker) breaker(ctx context.Context, b *quarantine.ReplayBatch) bool {
	published := b.Counts[quarantine.ItemPublished] + b.Counts[quarantine.ItemDeduplicated] + b.Counts[quarantine.ItemRefailed]
	refailed := b.Counts[quarantine.ItemRefailed]
	if w.breakerBase < 0 {
		w.breakerBase, w.breakerRefailBase = published, refailed
	}
	if b.HaltRefailRatio <= 0 {
		return false
	}
	p, r := published-w.breakerBase, refailed-w.breakerRefailBase
	if p < quarantine.MinBreakerSamples || float64(r)/float64(p) <= b.HaltRefailRatio {
		return false
	}
	w.e.system(ctx, b.ID, quarantine.ReplayActPause, fmt.Sprintf(
		"breaker: %d of %d replayed messages came back failing (%.0f%%, above the batch's %.0f%%); resume to go on",
		r, p, 100*float64(r)/float64(p), 100*b.HaltRefailRatio))
	w.e.cfg.Metrics.breaker()
	return true
}

// canary says how far the worker may lease (maxSeq, 0 = no limit), or how
// long to wait, or that the batch halted.
func (w *worker) canary(ctx context.Context, b *quarantine.ReplayBatch) (maxSeq int, wait time.Duration, stop bool) {
	if b.Canary <= 0 || b.CanaryVerdict == quarantine.CanaryPassed || b.CanaryVerdict == quarantine.CanaryFailed {
		// Failed and running again: an operator resumed the halted batch.
		return 0, 0, false
	}
	st := w.e.cfg.Store
	items, err := w.canaryItems(ctx, b)
	if err != nil {
		w.e.log.Warn("cannot read canary items", "replay", b.ID, "err", err)
		return 0, w.e.cfg.Poll, false
	}
	now := w.e.cfg.Now()
	switch b.CanaryVerdict {
	case quarantine.CanaryNone, quarantine.CanaryPending:
		var failed []quarantine.ReplayItem
		for _, it := range items {
			if it.Outcome == quarantine.ItemPending {
				return b.Canary, 0, false
			}
			if it.Outcome == quarantine.ItemFailed {
				failed = append(failed, it)
			}
		}
		// A canary message that could not be published fails the canary
		// as one that came back failing does: the rest would most likely
		// fail alike.
		if len(failed) > 0 {
			if !w.failCanary(ctx, b, fmt.Sprintf(
				"canary: %d of its %d messages could not be published (message %s: %s); resume to replay the rest anyway",
				len(failed), len(items), failed[0].MessageID, failed[0].Reason)) {
				return b.Canary, w.e.cfg.Poll, false
			}
			return 0, 0, true
		}
		until := now.Add(b.Observe)
		if _, err := st.SetReplayCanary(ctx, b.ID, quarantine.CanaryObserving, &until); err != nil {
			w.e.log.Warn("cannot record canary", "replay", b.ID, "err", err)
		}
		return 0, max(b.Observe, time.Millisecond), false
	}
	// Observing.
	for _, it := range items {
		if it.Outcome == quarantine.ItemRefailed {
			if !w.failCanary(ctx, b, fmt.Sprintf(
				"canary: message %s came back failing as %s; resume to replay the rest anyway", it.MessageID, it.RefailID)) {
				return 0, w.e.cfg.Poll, false
			}
			return 0, 0, true
		}
	}
	if b.CanaryUntil != nil && now.Before(*b.CanaryUntil) {
		return 0, b.CanaryUntil.Sub(now), false
	}
	if _, err := st.SetReplayCanary(ctx, b.ID, quarantine.CanaryPassed, nil); err != nil {
		w.e.log.Warn("cannot record canary", "replay", b.ID, "err", err)
		return 0, w.e.cfg.Poll, false
	}
	return 0, time.Millisecond, false
}

// failCanary records the canary's failed verdict and halts the batch with
// reason; false when the verdict could not be recorded (the caller tries
// again later).
func (w *worker) failCanary(ctx context.Context, b *quarantine.ReplayBatch, reason string) bool {
	if _, err := w.e.cfg.Store.SetReplayCanary(ctx, b.ID, quarantine.CanaryFailed, nil); err != nil {
		w.e.log.Warn("cannot record canary", "replay", b.ID, "err", err)
		return false
	}
	w.e.system(ctx, b.ID, quarantine.ReplayActHalt, reason)
	w.e.cfg.Metrics.halt()
	return true
}

// canaryItems returns the items with Seq < b.Canary.
func (w *worker) canaryItems(ctx context.Context, b *quarantine.ReplayBatch) ([]quarantine.ReplayItem, error) {
	var out []quarantine.ReplayItem
	after := -1
	for len(out) < b.Canary {
		page, more, err := w.e.cfg.Store.ListReplayItems(ctx, quarantine.ReplayItemFilter{
			BatchID: b.ID, After: after, Limit: min(b.Canary-len(out), quarantine.MaxLimit)})
		if err != nil {
			return nil, err
		}
		for _, it := range page {
			if it.Seq < b.Canary {
				out = append(out, it)
			}
		}
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].Seq
	}
	return out, nil
}

// pending is one leased item on its way.
type pending struct {
	lease   quarantine.ReplayLease
	out     Outgoing
	dropped []string
	route   Route
	slot    time.Time // not published before; zero: no slot yet
}

// publish publishes leased items, destination by destination, each at
// its slot of the shared schedule, recording what the destination
// answered every recordEvery(b) items and once its items are out. The
// slots of a destination's items are taken at once, after the lease
// (however long it took, they are not due yet). An item not published
// within late(b) of its slot (a slow moment) is given a new one rather
// than published with the items due after it. It returns how
// long to wait before the next lease (after a broker outage or a
// destination asking to slow down).
func (w *worker) publish(ctx context.Context, b *quarantine.ReplayBatch, leases []quarantine.ReplayLease) time.Duration {
	st := w.e.cfg.Store
	leasedAt := time.Now()
	var failed []quarantine.ReplayResult
	var order []string
	groups := map[string][]*pending{}
	for _, l := range leases {
		route, err := w.e.cfg.Router.Route(b, l.Message)
		if err != nil {
			failed = append(failed, w.result(b, &pending{lease: l}, quarantine.ItemFailed, quarantine.ErrorMessage(err)))
			continue
		}
		out, dropped := Prepare(b, l, route.Queue)
		if _, ok := groups[route.Label]; !ok {
			order = append(order, route.Label)
		}
		groups[route.Label] = append(groups[route.Label], &pending{lease: l, out: out, dropped: dropped, route: route})
	}
	w.record(ctx, failed, leasedAt.Add(w.e.cfg.Lease))
	var release []quarantine.ReplayLease
	var wait time.Duration
	lateBy := late(b)
	for gi, label := range order {
		rest := groups[label]
		var done []quarantine.ReplayResult
		var slotsAt time.Time // no slot free before then
		// Parts are published without waiting for the broker's answer
		// to the one before (the publisher pipelines them): a worker
		// waiting for confirms would publish the next items late. The
		// answers are handled as they come, at most maxParts waited for.
		answers := make(chan partAnswer, maxParts)
		outstanding := 0
		handle := func(a partAnswer) {
			outstanding--
			w.e.hear(label)
			var retry time.Duration
			var rel []quarantine.ReplayLease
			done, rel, retry = w.answered(ctx, b, label, a, done)
			release = append(release, rel...)
			wait = max(wait, retry)
			if len(done) >= recordEvery(b) && !w.recordBusy() {
				w.recordAsync(ctx, done, leasedAt.Add(w.e.cfg.Lease))
				done = nil
			}
		}
		// pause waits d, handling the answers that come meanwhile.
		pause := func(d time.Duration) {
			t := time.NewTimer(max(d, 0))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					return
				case a := <-answers:
					handle(a)
					if wait > 0 {
						return
					}
				}
			}
		}
		for len(rest) > 0 {
			for outstanding > 0 {
				select {
				case a := <-answers:
					handle(a)
					continue
				default:
				}
				break
			}
			if h := w.e.heldFor(label); h > 0 && wait == 0 {
				wait = h // the destination asked to wait (or is down): the rest goes back
			}
			if ctx.Err() != nil || time.Since(leasedAt) > w.e.cfg.Lease/2 || wait > 0 {
				// Give the rest back rather than publish on a lease
				// about to expire.
				for _, p := range rest {
					release = append(release, p.lease)
				}
				break
			}
			now := time.Now()
			var need, slotted []*pending
			var earliest time.Time // the earliest slot
			for _, p := range rest {
				if p.slot.IsZero() || now.Sub(p.slot) > lateBy {
					if !p.slot.IsZero() {
						w.e.cfg.Metrics.lateItems(1)
					}
					p.slot = time.Time{}
					need = append(need, p)
					continue
				}
				slotted = append(slotted, p)
				if earliest.IsZero() || p.slot.Before(earliest) {
					earliest = p.slot
				}
			}
			// Slots are taken when none of the items that have one is due
			// before the take would return (a take that waits for the
			// store would leave them late).
			if len(need) > 0 && !now.Before(slotsAt) && (earliest.IsZero() || earliest.Sub(now) > lead(w.slotsTook)) {
				n, first, slotWait, err := w.takeSlots(ctx, b, label, need[0].route.Publisher, len(need))
				if err != nil {
					if ctx.Err() == nil {
						w.e.log.Warn("cannot take publish slots", "replay", b.ID, "err", err)
					}
					wait = w.e.cfg.Poll
					continue
				}
				for k := range n {
					need[k].slot = slotTime(first, b.Rate, k)
				}
				switch {
				case n == 0:
					slotsAt = time.Now().Add(slotWait)
				case n < len(need):
					// The schedule is taken ahead (other workers' chunks):
					// the rest's slots are taken once they fit whole, a
					// chunk's time before the last granted, not a few at
					// every turn.
					slotsAt = slotTime(first, b.Rate, n-1).Add(-chunkTime(b))
				}
				if n > 0 || !earliest.IsZero() {
					continue
				}
			}
			if earliest.IsZero() {
				pause(min(time.Until(slotsAt), w.e.cfg.Poll))
				continue
			}
			// Published together: the items due within half the lateness
			// allowed after the earliest (at most maxGather), once the
			// last of them is due (never one before its slot): fewer,
			// larger publishes.
			at := earliest
			for _, p := range slotted {
				if p.slot.After(at) && p.slot.Sub(earliest) <= min(lateBy/2, maxGather) {
					at = p.slot
				}
			}
			if d := at.Sub(now); d > 0 {
				pause(min(d, w.e.cfg.Poll))
				continue
			}
			if outstanding >= maxParts {
				// Wait for an answer, then look again: the items due may
				// be late by then.
				handle(<-answers)
				continue
			}
			var ready []*pending
			rest = slices.DeleteFunc(rest, func(p *pending) bool {
				due := !p.slot.IsZero() && !p.slot.After(now)
				if due {
					ready = append(ready, p)
				}
				return due
			})
			slices.SortStableFunc(ready, func(x, y *pending) int { return x.slot.Compare(y.slot) })
			if len(ready) > maxPart {
				// The rest is published next, at once: its answer, and
				// its record, need not wait for this part's.
				rest = slices.Concat(ready[maxPart:], rest)
				ready = ready[:maxPart]
			}
			outs := make([]Outgoing, len(ready))
			for i, p := range ready {
				outs[i] = p.out
			}
			outstanding++
			go func(part []*pending) {
				started := time.Now()
				res := part[0].route.Publisher.Publish(ctx, outs)
				w.e.cfg.Metrics.publishTook(time.Since(started))
				answers <- partAnswer{part, res}
			}(ready)
		}
		for outstanding > 0 {
			handle(<-answers)
		}
		w.recordAsync(ctx, done, leasedAt.Add(w.e.cfg.Lease))
		if wait > 0 {
			for _, l := range order[gi+1:] {
				for _, p := range groups[l] {
					release = append(release, p.lease)
				}
			}
			break
		}
	}
	if len(release) > 0 {
		// A fresh context: a shutdown must still give leases back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := st.ReleaseReplayItems(rctx, release); err != nil {
			w.e.log.Warn("cannot give back replay items; their leases will expire", "replay", b.ID, "err", err)
		}
		cancel()
	}
	return wait
}

// maxParts is how many parts of a chunk a worker has published and not
// had the broker's answer for, at most: parts are maxGather of the
// schedule at most, a broker's answers may take longer.
const maxParts = 32

// maxPart is the most items of one part: the broker's answer to a part
// comes once every item of it is confirmed, and what it answered is
// recorded then, so a part of a whole chunk would hold its record back
// until its last item is confirmed.
const maxPart = 500

// partAnswer is the broker's answer to a part of a chunk.
type partAnswer struct {
	part []*pending
	res  []Result
}

// answered handles the broker's answer a to a part published to the
// destination label: it returns done with the outcomes to record added,
// the leases to give back (a refusal, no answer) and how long to wait
// before publishing to label again (0: no need).
func (w *worker) answered(ctx context.Context, b *quarantine.ReplayBatch, label string, a partAnswer, done []quarantine.ReplayResult) ([]quarantine.ReplayResult, []quarantine.ReplayLease, time.Duration) {
	var release []quarantine.ReplayLease
	var wait time.Duration
	transient := false
	refused := 0 // the most refusals of an item given back (0: none refused)
	for i, p := range a.part {
		var r Result
		if i < len(a.res) {
			r = a.res[i]
		} else {
			r = Result{Outcome: quarantine.ItemPending, Err: fmt.Errorf("the publisher gave no answer")}
		}
		switch r.Outcome {
		case quarantine.ItemPublished, quarantine.ItemDeduplicated:
			done = append(done, w.result(b, p, r.Outcome, ""))
		case quarantine.ItemFailed:
			done = append(done, w.result(b, p, quarantine.ItemFailed, errText(r.Err)))
		default:
			if r.Refused {
				refusals := p.lease.Item.Refusals + 1
				if refusals >= w.e.cfg.PublishAttempts {
					done = append(done, w.result(b, p, quarantine.ItemFailed,
						fmt.Sprintf("refused %d times; the last: %s", refusals, errText(r.Err))))
					continue
				}
				p.lease.Refusal = errText(r.Err)
				refused = max(refused, refusals)
			}
			transient = true
			release = append(release, p.lease)
			if r.RetryAfter > wait {
				wait = r.RetryAfter
			}
			w.e.cfg.Metrics.outcome(p.out.Queue, "retry")
		}
	}
	if !transient {
		w.failures = 0
		return done, release, 0
	}
	w.failures++
	switch {
	case refused > 0:
		wait = max(wait, fullJitter(refused, w.e.cfg.RetryMin, w.e.cfg.RetryMax))
	case wait == 0:
		wait = collect.Backoff(w.failures, 200*time.Millisecond, 30*time.Second)
	}
	// Every worker of this engine waits, not only this one.
	w.e.hold(ctx, label, time.Now().Add(wait))
	w.e.log.Warn("destination did not take every message; retrying later", "replay", b.ID,
		"destination", label, "retry_in", wait, "err", firstErr(a.res))
	return done, release, wait
}

// takeSlots takes up to want slots of the schedule of b publishing to the
// destination label (through pub): how many and the first, or how long
// until one is free.
func (w *worker) takeSlots(ctx context.Context, b *quarantine.ReplayBatch, label string, pub Publisher, want int) (int, time.Time, time.Duration, error) {
	if !w.e.heardFrom(label) {
		// A publisher that connects ahead of its first publish does so
		// now: the slots need no lead for its connection then.
		if c, ok := pub.(Connector); ok && c.Connect(ctx) == nil {
			w.e.hear(label)
		}
	}
	started, ld := time.Now(), lead(w.grantLag)
	if !w.e.heardFrom(label) {
		ld = maxLead
	}
	n, first, wait, err := w.e.cfg.Store.TakeReplaySlots(ctx, buckets(b, label), want, ld, ahead(b, ld))
	if err == nil && n > 0 {
		returned := time.Now()
		observe(&w.slotsTook, returned.Sub(started))
		// A schedule left idle starts lead after the grant's now, which
		// tells the lag. A grant going on from an earlier one's slots
		// may read longer or shorter; the decaying maximum keeps the
		// longest of late.
		if granted := first.Add(-ld); !granted.Before(started) && granted.Before(returned) {
			observe(&w.grantLag, returned.Sub(granted))
		}
	}
	return n, first, wait, err
}

// result builds the record of one item.
func (w *worker) result(b *quarantine.ReplayBatch, p *pending, o quarantine.ItemOutcome, reason string) quarantine.ReplayResult {
	m := p.lease.Message
	return quarantine.ReplayResult{
		BatchID:        b.ID,
		MessageID:      p.lease.Item.MessageID,
		Fence:          p.lease.Fence,
		Outcome:        o,
		Reason:         reason,
		Destination:    p.route.Label,
		PayloadVersion: m.PayloadVersion,
		PayloadSHA256:  m.PayloadSHA256,
		DroppedHeaders: p.dropped,
		At:             w.e.cfg.Now(),
	}
}

// recordAsync records results in the background, once the record under
// way (if any) ended, while the worker goes on publishing or leases its
// next chunk; it waits only when two records are under way already (the
// store is behind). run waits for the last one before it returns.
func (w *worker) recordAsync(ctx context.Context, results []quarantine.ReplayResult, until time.Time) {
	if len(results) == 0 {
		return
	}
	w.recordBusy()
	for len(w.records) >= 2 {
		<-w.records[0]
		w.records = w.records[1:]
	}
	var prev chan struct{}
	if len(w.records) > 0 {
		prev = w.records[len(w.records)-1]
	}
	done := make(chan struct{})
	w.records = append(w.records, done)
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		w.record(ctx, results, until)
	}()
}

// recordBusy says whether a record is under way in the background,
// forgetting the ones that ended.
func (w *worker) recordBusy() bool {
	for len(w.records) > 0 {
		select {
		case <-w.records[0]:
			w.records = w.records[1:]
			continue
		default:
		}
		break
	}
	return len(w.records) > 0
}

// awaitRecord waits until the records under way in the background ended.
func (w *worker) awaitRecord() {
	for _, c := range w.records {
		<-c
	}
	w.records = nil
}

// record stores results. After a publish it must not be lost to a
// shutdown, so it has a context of its own. A store busy or away
// (EUNAVAILABLE) is tried again, backing off, until until (the end of the
// items' lease) while the engine runs; a failure that stays leaves the
// leases to expire, and the items are published again (same idempotency
// key).
func (w *worker) record(ctx context.Context, results []quarantine.ReplayResult, until time.Time) {
	if len(results) == 0 {
		return
	}
	var stale []int
	var err error
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		stale, err = w.e.cfg.Store.RecordReplayResults(rctx, results)
		cancel()
		// A store busy or briefly away: try again while the lease lasts
		// (and the engine runs), rather than leave what was published to
		// be published again once the lease ends.
		pause := collect.Backoff(attempt, 50*time.Millisecond, 2*time.Second)
		if err == nil || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || ctx.Err() != nil || time.Until(until) < pause {
			break
		}
		w.e.log.Warn("replay results not recorded yet; trying again while their lease lasts", "replay", w.id, "n", len(results), "err", err)
		backoff.Sleep(ctx, pause)
	}
	if err != nil {
		w.e.log.Error("cannot record replay results; the items will be published again after their lease", "replay", w.id, "n", len(results), "err", err)
		return
	}
	isStale := make(map[int]bool, len(stale))
	for _, i := range stale {
		isStale[i] = true
	}
	for i, r := range results {
		if isStale[i] {
			w.e.cfg.Metrics.outcome(queueOf(r.Destination), "stale")
			continue
		}
		w.e.cfg.Metrics.outcome(queueOf(r.Destination), string(r.Outcome))
	}
	if len(stale) > 0 {
		w.e.log.Warn("results refused: another engine took the items over, or the batch was cancelled", "replay", w.id, "n", len(stale))
	}
}

// fullJitter is the wait after an item's n-th refusal: a random time up to
// lo doubled n-1 times, at most hi (exponential backoff with full
// jitter), but never under a millisecond.
func fullJitter(n int, lo, hi time.Duration) time.Duration {
	ceil := hi
	if n-1 < 40 && lo<<(n-1) > 0 && lo<<(n-1) < hi {
		ceil = lo << (n - 1)
	}
	return max(time.Millisecond, rand.N(ceil+1))
}

func errText(err error) string {
	if err == nil {
		return "refused by the destination"
	}
	return quarantine.SanitizeText(err.Error())
}

func firstErr(res []Result) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// queueOf returns the queue part of a route label ("kind:name/queue").
func queueOf(label string) string {
	for i := 0; i < len(label); i++ {
		if label[i] == '/' {
			return label[i+1:]
		}
	}
	return label
}
