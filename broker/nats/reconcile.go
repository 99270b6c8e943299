package nats

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/backoff"
)

// Bounds of one reconciliation pass.
const (
	maxReconcile = 100000 // candidates taken per pass; the next pass finds the rest
	// maxCaptureToScan defers reconciliation while more advisories than
	// this wait in the capture stream: a pass reads each of them, one
	// round trip each, before the advisories are drained (20,000 waiting
	// at a start held the drain for seconds), and the advisories it would
	// wait for are collected first anyway. The next pass comes within
	// ReconcileEvery.
	maxCaptureToScan = 1000
)

// errDeferred says that reconciliation waits for the advisory backlog.
var errDeferred = errors.New("the advisory backlog is large: reconciliation waits until it is drained")

// reconcile looks for messages that the worker consumer gave up on but
// whose advisory this collector never received (it was published before
// the capture stream existed, say). The method:
//
//  1. Read the worker consumer's state. Every message at or below its ack
//     floor was acknowledged or given up on (servers from 2.10 move the
//     floor past a message once MaxDeliver is reached). Servers before
//     2.10 leave the floor behind a given-up message, so when the
//     consumer has nothing pending (num_ack_pending 0) every message up to
//     its last delivered one counts too.
//  2. The stream must drop acknowledged messages: work-queue retention, or
//     interest retention with this consumer as its only one. Then a
//     message still in the stream within that range was never
//     acknowledged: the consumer gave up on it (MaxDeliver, or a
//     terminate). Under limits retention acknowledged messages stay, the
//     two cannot be told apart, and reconciliation is skipped (logged);
//     the capture stream still keeps every advisory published after it was
//     made.
//  3. Messages before the consumer's start (deliver policy), outside its
//     filter, already stored by this process, or with an advisory still
//     waiting in the capture stream are left out. A message once looked at
//     is not looked at again by this process: each pass starts where the
//     last one ended (and from the start after a restart).
//
// What it finds is handed out by Receive after a short settle (each is
// fetched again then, so one acknowledged meanwhile is not taken).
func (s *Source) reconcile(ctx context.Context, l *link) error {
	defer s.adv.passes.Add(1)
	s.adv.mu.Lock()
	s.adv.nextReconcile = time.Now().Add(s.cfg.ReconcileEvery)
	s.adv.mu.Unlock()

	cfg := s.cfg.Advisories
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cons, err := l.js.Consumer(cctx, cfg.Stream, cfg.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.skipReconcile("the worker consumer does not exist")
		return nil
	}
	if err != nil {
		return unavailable(err, "nats: cannot read consumer %q of stream %q", cfg.Consumer, cfg.Stream)
	}
	ci := cons.CachedInfo()
	si, err := l.worker.Info(cctx)
	if err != nil {
		return unavailable(err, "nats: cannot read stream %q", cfg.Stream)
	}
	start, why := reconcileStart(si, ci)
	if why != "" {
		s.skipReconcile(why)
		return nil
	}
	s.skipReconcile("")
	limit := ci.AckFloor.Stream
	if ci.NumAckPending == 0 {
		limit = max(limit, ci.Delivered.Stream)
	}
	from := max(si.State.FirstSeq, start.seq, 1)
	s.adv.mu.Lock()
	if !s.adv.created.Equal(si.Created) || s.adv.scanned > si.State.LastSeq {
		s.adv.created, s.adv.scanned = si.Created, 0 // a new stream: look at everything
	}
	from = max(from, s.adv.scanned+1)
	s.adv.mu.Unlock()
	if si.State.Msgs == 0 || limit < from {
		return nil
	}
	waiting, err := s.waitingAdvisories(ctx, l)
	if errors.Is(err, errDeferred) {
		s.log.Info("reconciliation deferred", "reason", err.Error())
		return nil
	} else if err != nil {
		return err
	}
	filters := ci.Config.FilterSubjects
	if len(filters) == 0 && ci.Config.FilterSubject != "" {
		filters = []string{ci.Config.FilterSubject}
	}
	next := ">"
	if len(filters) == 1 {
		next = filters[0]
	}
	var found []candidate
	scanned := from - 1
	defer func() {
		s.adv.mu.Lock()
		s.adv.scanned = max(s.adv.scanned, scanned)
		s.adv.mu.Unlock()
	}()
	for seq := from; seq <= limit && len(found) < maxReconcile; {
		if waiting[seq] { // its advisory waits: not a candidate, no need to read it
			scanned, seq = seq, seq+1
			continue
		}
		raw, err := getMsg(ctx, l.worker, seq, jetstream.WithGetMsgSubject(next))
		if isNotFound(err) {
			scanned = limit
			break
		}
		if err != nil {
			return unavailable(err, "nats: cannot read stream %q", cfg.Stream)
		}
		if raw.Sequence > limit {
			scanned = limit
			break
		}
		seq = raw.Sequence + 1
		scanned = raw.Sequence
		switch {
		case !matchesAny(filters, raw.Subject),
			!start.time.IsZero() && raw.Time.Before(start.time),
			s.adv.wasHandled(raw.Sequence), waiting[raw.Sequence]:
			continue
		}
		found = append(found, candidate{seq: raw.Sequence, maxDeliver: ci.Config.MaxDeliver})
	}
	if len(found) == 0 {
		return nil
	}
	s.log.Info("reconciliation found messages whose advisory was missed", "count", len(found),
		"stream", cfg.Stream, "consumer", cfg.Consumer)
	if !backoff.Sleep(ctx, s.settle) {
		return ctx.Err()
	}
	s.adv.addPending(found)
	return nil
}

// consumerStart is where a consumer's deliveries begin.
type consumerStart struct {
	seq  uint64
	time time.Time
}

// reconcileStart says where the consumer began, or why its stream cannot
// be reconciled.
func reconcileStart(si *jetstream.StreamInfo, ci *jetstream.ConsumerInfo) (consumerStart, string) {
	var st consumerStart
	switch {
	case ci.Config.AckPolicy != jetstream.AckExplicitPolicy:
		return st, "the worker consumer does not use explicit acknowledgements"
	case ci.Config.MaxDeliver <= 0:
		return st, "the worker consumer has no MaxDeliver: it never gives up on a message"
	}
	switch si.Config.Retention {
	case jetstream.WorkQueuePolicy:
	case jetstream.InterestPolicy:
		if si.State.Consumers > 1 {
			return st, "the interest stream has other consumers: a message it keeps may wait for them"
		}
	default:
		return st, "limits retention keeps acknowledged messages: given-up ones cannot be told apart"
	}
	switch ci.Config.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
	case jetstream.DeliverByStartSequencePolicy:
		st.seq = ci.Config.OptStartSeq
	case jetstream.DeliverByStartTimePolicy:
		if ci.Config.OptStartTime != nil {
			st.time = *ci.Config.OptStartTime
		}
	case jetstream.DeliverNewPolicy:
		st.time = ci.Created
	default:
		return st, "the worker consumer's deliver policy starts at the last message: its start is unknown"
	}
	return st, ""
}

// skipReconcile logs, once per reason, why reconciliation does not run.
func (s *Source) skipReconcile(why string) {
	s.adv.mu.Lock()
	changed := s.adv.skipped != why
	s.adv.skipped = why
	s.adv.mu.Unlock()
	if changed && why != "" {
		s.log.Warn("reconciliation is not possible; advisories are still collected", "reason", why,
			"stream", s.cfg.Advisories.Stream, "consumer", s.cfg.Advisories.Consumer)
	}
}

// waitingAdvisories returns the original sequences of the advisories
// still in the capture stream (a work queue: they are not acknowledged
// yet). Reconciliation leaves those to their advisory, which says more
// (deliveries, time), and so a message it deletes is never reported lost
// by an advisory handled after it.
func (s *Source) waitingAdvisories(ctx context.Context, l *link) (map[uint64]bool, error) {
	cfg := s.cfg.Advisories
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := l.js.Stream(cctx, cfg.CaptureStream)
	if err != nil {
		return nil, unavailable(err, "nats: cannot read the capture stream %q", cfg.CaptureStream)
	}
	state := st.CachedInfo().State
	if state.Msgs > maxCaptureToScan {
		return nil, errDeferred
	}
	out := make(map[uint64]bool, state.Msgs)
	subj := AdvisorySubject(cfg.Stream, cfg.Consumer)
	for seq := max(state.FirstSeq, 1); state.Msgs > 0 && seq <= state.LastSeq; {
		raw, err := getMsg(ctx, st, seq, jetstream.WithGetMsgSubject(subj))
		if isNotFound(err) {
			break
		}
		if err != nil {
			return nil, unavailable(err, "nats: cannot read the capture stream %q", cfg.CaptureStream)
		}
		seq = raw.Sequence + 1
		if a, err := parseAdvisory(raw.Data, cfg.Stream, cfg.Consumer); err == nil {
			out[a.StreamSeq] = true
		}
	}
	return out, nil
}

// takeReconciled hands out up to limit messages found by reconciliation,
// each fetched again now.
func (s *Source) takeReconciled(ctx context.Context, l *link, limit int) ([]collect.Delivery, error) {
	cfg := s.cfg.Advisories
	cs := s.adv.takePending(limit)
	ds := make([]collect.Delivery, 0, len(cs))
	raws := make([]*jetstream.RawStreamMsg, len(cs))
	errs := parallel(len(cs), getConcurrency, func(i int) error {
		if s.adv.wasHandled(cs[i].seq) {
			return nil
		}
		var err error
		raws[i], err = getMsg(ctx, l.worker, cs[i].seq)
		return err
	})
	for i, c := range cs {
		if s.adv.wasHandled(c.seq) {
			continue
		}
		raw, err := raws[i], errs[i]
		if isNotFound(err) {
			continue // acknowledged or deleted since: not ours to report
		}
		if err != nil {
			s.adv.addPending(cs[i:])
			return ds, unavailable(err, "nats: cannot fetch message %d of stream %q", c.seq, cfg.Stream)
		}
		g := gaveUp{Consumer: cfg.Consumer, Deliveries: max(c.maxDeliver, 0),
			Reason: reconciledReason(cfg.Stream, cfg.Consumer, c.maxDeliver)}
		ds = append(ds, collect.Delivery{
			Message: decodeOriginal(s.name, fromRaw(cfg.Stream, raw), g),
			Handle:  handle{worker: l.worker, seq: c.seq},
		})
	}
	return ds, nil
}

func getMsg(ctx context.Context, st jetstream.Stream, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return st.GetMsg(ctx, seq, opts...)
}

func matchesAny(filters []string, subject string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}
