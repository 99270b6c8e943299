package nats

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Reasons of a collect.lost audit event.
const (
	LostNotFound        = "not_found"        // the message was deleted from its stream before it was fetched
	LostStreamNotFound  = "stream_not_found" // the whole stream was deleted
	LostStreamRecreated = "stream_recreated" // the sequence holds a newer message: the stream was made anew
)

// getConcurrency bounds the originals fetched at once by stream sequence.
const getConcurrency = 32

// maxHandled bounds the memory of the sequences this process stored.
const maxHandled = 1 << 18

// advisoryState is what mode (b) remembers between calls.
type advisoryState struct {
	mu            sync.Mutex
	handled       map[uint64]struct{} // original sequences stored and acknowledged by this process
	nextReconcile time.Time
	pending       []candidate // found by reconciliation, not yet handed out
	skipped       string      // why reconciliation was last skipped (logged once)
	// scanned is the stream sequence up to which reconciliation has looked
	// at every message of the stream made at created: later passes start
	// after it.
	scanned uint64
	created time.Time
	// passes counts the reconciliation passes that returned, whatever
	// they found (tests wait on it to know that a pass ran).
	passes atomic.Uint64
}

// candidate is a message found by reconciliation.
type candidate struct {
	seq        uint64
	maxDeliver int
}

func newAdvisoryState() *advisoryState {
	return &advisoryState{handled: map[uint64]struct{}{}}
}

func (a *advisoryState) reconcileNow() {
	a.mu.Lock()
	a.nextReconcile = time.Time{}
	a.mu.Unlock()
}

func (a *advisoryState) next() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextReconcile
}

func (a *advisoryState) markHandled(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.handled) >= maxHandled {
		a.handled = map[uint64]struct{}{}
	}
	a.handled[seq] = struct{}{}
}

func (a *advisoryState) wasHandled(seq uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.handled[seq]
	return ok
}

func (a *advisoryState) addPending(cs []candidate) {
	a.mu.Lock()
	a.pending = append(a.pending, cs...)
	a.mu.Unlock()
}

func (a *advisoryState) takePending(n int) []candidate {
	a.mu.Lock()
	defer a.mu.Unlock()
	n = min(n, len(a.pending))
	out := a.pending[:n:n]
	a.pending = a.pending[n:]
	return out
}

// receiveAdvisories is Receive in mode (b): first what reconciliation
// found, then the advisories of the capture stream, each resolved to the
// message it is about.
func (s *Source) receiveAdvisories(ctx context.Context, l *link, limit int, linger time.Duration) ([]collect.Delivery, error) {
	for {
		if next := s.adv.next(); !time.Now().Before(next) {
			if err := s.reconcile(ctx, l); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.log.Warn("reconciliation failed; advisories are still collected", "err", err)
			}
		}
		if ds, err := s.takeReconciled(ctx, l, limit); len(ds) > 0 || err != nil {
			return ds, err
		}
		msgs, err := s.fetch(ctx, l, limit, linger, s.adv.next())
		if len(msgs) == 0 && err == nil {
			continue // reconciliation is due
		}
		ds, herr := s.resolve(ctx, l, msgs)
		if err == nil {
			err = herr
		}
		return ds, err
	}
}

// resolve turns advisories into deliveries of the messages they are
// about. A malformed advisory is delivered raw and flagged; an advisory
// whose message is gone is recorded as a collect.lost audit event and
// acknowledged; one whose message cannot be read now is returned to the
// capture stream for later.
func (s *Source) resolve(ctx context.Context, l *link, msgs []jetstream.Msg) ([]collect.Delivery, error) {
	cfg := s.cfg.Advisories
	ds := make([]collect.Delivery, 0, len(msgs))
	var firstErr error
	keep := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	// The originals are fetched at once (one round trip each, which in
	// turn would bound the drain to a few thousand a second), then
	// handled in the advisories' order.
	type fetched struct {
		in   streamMsg
		a    advisory
		perr error
		raw  *jetstream.RawStreamMsg
		err  error
	}
	fs := make([]fetched, len(msgs))
	parallel(len(msgs), getConcurrency, func(i int) error {
		f := &fs[i]
		f.in = toStreamMsg(msgs[i])
		if f.a, f.perr = parseAdvisory(f.in.Data, cfg.Stream, cfg.Consumer); f.perr == nil {
			f.raw, f.err = getMsg(ctx, l.worker, f.a.StreamSeq)
		}
		return nil
	})
	for i, m := range msgs {
		in, a, perr, raw, err := fs[i].in, fs[i].a, fs[i].perr, fs[i].raw, fs[i].err
		if perr != nil {
			ds = append(ds, collect.Delivery{Message: decodeBadAdvisory(s.name, in, perr), Handle: handle{msg: m}})
			continue
		}
		switch {
		case err == nil && !a.Timestamp.IsZero() && raw.Time.After(a.Timestamp):
			keep(s.lost(ctx, m, a, LostStreamRecreated, "the sequence now holds a message stored after the advisory"))
		case err == nil:
			g := gaveUp{Consumer: cfg.Consumer, Deliveries: a.deliveries(), FailedAt: a.Timestamp,
				Reason: maxDeliverReason(cfg.Stream, cfg.Consumer, a.deliveries())}
			ds = append(ds, collect.Delivery{
				Message: decodeOriginal(s.name, fromRaw(cfg.Stream, raw), g),
				Handle:  handle{msg: m, worker: l.worker, seq: a.StreamSeq},
			})
		case isNotFound(err) && s.adv.wasHandled(a.StreamSeq):
			// This process stored it, then deleted it: nothing is lost.
			if err := m.DoubleAck(ctx); err != nil {
				keep(unavailable(err, "nats: cannot acknowledge an advisory"))
			}
		case isNotFound(err):
			keep(s.lost(ctx, m, a, LostNotFound, "the message was deleted from the stream before the collector could fetch it"))
		case isStreamGone(err):
			keep(s.lost(ctx, m, a, LostStreamNotFound, "the stream was deleted before the collector could fetch the message"))
		default:
			_ = m.NakWithDelay(time.Second)
			keep(unavailable(err, "nats: cannot fetch message %d of stream %q", a.StreamSeq, cfg.Stream))
		}
	}
	return ds, firstErr
}

// lostDetails are the details of a collect.lost audit event.
type lostDetails struct {
	Stream     string `json:"stream"`
	Seq        uint64 `json:"seq"`
	Consumer   string `json:"consumer"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail"`
	Deliveries uint64 `json:"deliveries"`
	AdvisoryID string `json:"advisory_id"`
	Collector  string `json:"collector"`
}

// lost records that the message of advisory a is gone, then acknowledges
// the advisory. When the event cannot be recorded, the advisory comes
// back after a few seconds and the error is returned: a lost message is never
// skipped in silence. (A crash between the record and the acknowledgement
// records the event twice.)
func (s *Source) lost(ctx context.Context, m jetstream.Msg, a advisory, reason, detail string) error {
	subject := fmt.Sprintf("%s:%d", a.Stream, a.StreamSeq)
	ev := quarantine.NewAuditEvent("collector:"+s.name, ActionCollectLost, subject, lostDetails{
		Stream: a.Stream, Seq: a.StreamSeq, Consumer: a.Consumer, Reason: reason, Detail: detail,
		Deliveries: a.Deliveries, AdvisoryID: a.ID, Collector: s.name,
	})
	s.log.Error("a message its consumer gave up on is gone before it could be collected",
		"stream", a.Stream, "seq", a.StreamSeq, "consumer", a.Consumer, "reason", reason)
	s.mu.Lock()
	audit := s.audit
	s.mu.Unlock()
	if audit != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
		err := audit(actx, ev)
		cancel()
		if err != nil {
			_ = m.NakWithDelay(s.retryLost)
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err,
				Message: fmt.Sprintf("nats: cannot record the loss of %s; retrying", subject)}
		}
	}
	if err := m.DoubleAck(ctx); err != nil {
		return unavailable(err, "nats: cannot acknowledge the advisory of %s", subject)
	}
	return nil
}

// afterStore runs after the acknowledgements of a mode (b) batch: the
// originals whose delivery was acknowledged are remembered and, when
// configured, deleted from the worker stream. A failed delete is logged:
// the message is stored, and stays in the stream.
func (s *Source) afterStore(ctx context.Context, hs []handle, ackErrs []error) {
	var del []handle
	for i, h := range hs {
		if ackErrs[i] != nil || h.seq == 0 {
			continue
		}
		s.adv.markHandled(h.seq)
		if s.cfg.DeleteAfterStore {
			del = append(del, h)
		}
	}
	errs := parallel(len(del), 32, func(i int) error {
		dctx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		err := del[i].worker.DeleteMsg(dctx, del[i].seq)
		if isNotFound(err) {
			return nil
		}
		return err
	})
	if n, first := countErrors(errs); n > 0 {
		s.log.Warn("stored messages could not be deleted from the worker stream", "count", n, "err", first)
	}
}
