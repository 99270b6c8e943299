package collect_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// memSource is an in-memory broker queue for unit tests of the loop: it
// hands out messages, tracks which are unacknowledged, and can "crash"
// (return every unacknowledged message to the queue, as a broker does when
// a consumer's connection dies).
type memSource struct {
	mu       sync.Mutex
	ready    []int // message numbers waiting
	inflight map[int]bool
	acked    map[int]int // number -> times acknowledged
	failRecv int         // Receive calls left to fail
	ackErr   error
	notify   chan struct{}
	extended int
	window   atomic.Int64 // set by SetWindow
	ackFirst []int        // the first message of each Ack call, in order
}

func (s *memSource) SetWindow(n int) { s.window.Store(int64(n)) }

func newMemSource(n int) *memSource {
	s := &memSource{inflight: map[int]bool{}, acked: map[int]int{}, notify: make(chan struct{}, 1)}
	for i := range n {
		s.ready = append(s.ready, i)
	}
	return s
}

func (s *memSource) message(i int) *quarantine.Message {
	return &quarantine.Message{
		Source: "mem", SourceKind: quarantine.SourceMemory, Queue: "orders", JobName: "charge",
		MessageID: fmt.Sprint(i), DedupeKey: fmt.Sprint("m-", i), FailureClass: quarantine.ClassExhausted,
		Payload: fmt.Appendf(nil, `{"order_id":%d}`, i), Headers: map[string]string{"Authorization": "Bearer secret"},
	}
}

func (s *memSource) Receive(ctx context.Context, max int, linger time.Duration) ([]collect.Delivery, error) {
	for {
		s.mu.Lock()
		if s.failRecv > 0 {
			s.failRecv--
			s.mu.Unlock()
			return nil, errors.New("connection refused")
		}
		if len(s.ready) > 0 {
			n := min(max, len(s.ready))
			out := make([]collect.Delivery, n)
			for k, i := range s.ready[:n] {
				s.inflight[i] = true
				out[k] = collect.Delivery{Message: s.message(i), Handle: i}
			}
			s.ready = s.ready[n:]
			s.mu.Unlock()
			return out, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.notify:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *memSource) Ack(_ context.Context, ds []collect.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ackErr != nil {
		return s.ackErr
	}
	if len(ds) > 0 {
		s.ackFirst = append(s.ackFirst, ds[0].Handle.(int))
	}
	for _, d := range ds {
		i := d.Handle.(int)
		if !s.inflight[i] {
			return fmt.Errorf("ack of %d, which is not in flight", i)
		}
		delete(s.inflight, i)
		s.acked[i]++
	}
	return nil
}

func (s *memSource) Extend(context.Context, []collect.Delivery) error {
	s.mu.Lock()
	s.extended++
	s.mu.Unlock()
	return nil
}

func (s *memSource) ExtendEvery() time.Duration { return 5 * time.Millisecond }

func (s *memSource) Close() error { return nil }

// crash returns every unacknowledged message to the queue.
func (s *memSource) crash() {
	s.mu.Lock()
	for i := range s.inflight {
		s.ready = append(s.ready, i)
	}
	s.inflight = map[int]bool{}
	s.mu.Unlock()
}

func (s *memSource) state() (ready, inflight, acked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready), len(s.inflight), len(s.acked)
}
