package nats

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/backoff"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

// apiTimeout bounds one JetStream API call (set-up, consumer info, get,
// delete).
const apiTimeout = 10 * time.Second

// maxAckPending of the collector's consumers: far above one batch, so that
// two collectors sharing a consumer never starve each other.
const maxAckPending = 20000

// link is one connection and the handles set up on it.
type link struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	ready atomic.Bool // the consumer (and streams) are set up

	cons   jetstream.Consumer // mode a: on the failure stream; mode b: on the capture stream
	worker jetstream.Stream   // mode b: the stream whose consumer gives up on messages
}

// connect returns the current link, dialling and setting it up first when
// needed. The client reconnects a lost connection by itself; connect waits
// a little for that and otherwise reports the server unavailable.
func (s *Source) connect(ctx context.Context) (*link, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: the source is closed")
	}
	l := s.link
	if l != nil && l.nc.IsClosed() {
		l, s.link = nil, nil
	}
	s.mu.Unlock()

	if l == nil {
		var err error
		if l, err = s.dial(); err != nil {
			return nil, err
		}
	}
	if err := waitConnected(ctx, l.nc, 2*s.poll); err != nil {
		return nil, err
	}
	if !l.ready.Load() {
		if err := s.setup(ctx, l); err != nil {
			return nil, err
		}
		l.ready.Store(true)
	}
	return l, nil
}

// connectJetStream dials url as the named client (connectNATS) and
// starts a JetStream context with opts on the connection.
func connectJetStream(url, name string, log *slog.Logger, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := connectNATS(url, name, log)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, quarantine.Internal(err, "nats: cannot start a JetStream context")
	}
	return nc, js, nil
}

// connectNATS dials url as the named client, reconnecting forever. A
// publish (an ack, a pull, a replay) fails at once while disconnected
// instead of being buffered: its caller backs off and retries.
func connectNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ReconnectBufSize(-1),
		nats.PingInterval(10*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to NATS", "server", redacturl.List(c.ConnectedUrl()))
		}),
	)
	if err != nil {
		return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err,
			Message: "nats: cannot connect to " + redacturl.List(url)}
	}
	return nc, nil
}

func (s *Source) dial() (*link, error) {
	nc, js, err := connectJetStream(s.cfg.URL, "quarantine collector "+s.name, s.log)
	if err != nil {
		return nil, err
	}
	l := &link{nc: nc, js: js}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: the source is closed")
	}
	s.link = l
	s.log.Info("connected to NATS", "config", s.cfg)
	return l, nil
}

// waitConnected waits up to d for a reconnecting connection.
func waitConnected(ctx context.Context, nc *nats.Conn, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: the connection is closed")
		}
		if time.Now().After(deadline) {
			return quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: not connected (reconnecting)")
		}
		if !backoff.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// setup makes the collector's durable consumer (and, in mode b, the
// capture stream) exist with the configured settings. It is idempotent:
// two collectors sharing a consumer both run it.
func (s *Source) setup(ctx context.Context, l *link) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if !s.cfg.AdvisoryMode() {
		cons, err := l.js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, s.consumerConfig(s.cfg.Subject))
		if err != nil {
			return unavailable(err, "nats: cannot set up consumer %q on stream %q", s.cfg.Consumer, s.cfg.Stream)
		}
		l.cons = cons
		return nil
	}
	a := s.cfg.Advisories
	worker, err := l.js.Stream(ctx, a.Stream)
	if err != nil {
		return unavailable(err, "nats: cannot find the worker stream %q", a.Stream)
	}
	if err := s.ensureCapture(ctx, l.js); err != nil {
		return err
	}
	cons, err := l.js.CreateOrUpdateConsumer(ctx, a.CaptureStream, s.consumerConfig(AdvisorySubject(a.Stream, a.Consumer)))
	if err != nil {
		return unavailable(err, "nats: cannot set up consumer %q on the capture stream %q", s.cfg.Consumer, a.CaptureStream)
	}
	l.worker, l.cons = worker, cons
	s.adv.reconcileNow()
	return nil
}

func (s *Source) consumerConfig(filter string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       s.cfg.Consumer,
		Description:   "quarantine collector " + s.name,
		FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxDeliver:    -1, // the collector never gives up on a message
		MaxAckPending: maxAckPending,
	}
}

// AdvisorySubject is the subject of the MaxDeliver advisories of a
// consumer.
func AdvisorySubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// ensureCapture creates the capture stream of the advisories, or checks
// that the existing one captures them. It is a work-queue stream: an
// advisory leaves it once the collector acknowledged it.
func (s *Source) ensureCapture(ctx context.Context, js jetstream.JetStream) error {
	a := s.cfg.Advisories
	subj := AdvisorySubject(a.Stream, a.Consumer)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        a.CaptureStream,
		Description: "MaxDeliver advisories of " + a.Stream + "/" + a.Consumer + ", kept for the quarantine collector",
		Subjects:    []string{subj},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return unavailable(err, "nats: cannot create the capture stream %q for %s", a.CaptureStream, subj)
	}
	st, err := js.Stream(ctx, a.CaptureStream)
	if err != nil {
		return unavailable(err, "nats: cannot read the capture stream %q", a.CaptureStream)
	}
	for _, f := range st.CachedInfo().Config.Subjects {
		if subjectMatches(f, subj) {
			return nil
		}
	}
	return quarantine.Errorf(quarantine.EUNAVAILABLE, "nats: the stream %q exists but does not capture %s", a.CaptureStream, subj)
}

// unavailable wraps a server error as EUNAVAILABLE.
func unavailable(err error, format string, args ...any) error {
	e := quarantine.Errorf(quarantine.EUNAVAILABLE, format, args...)
	e.Err = err
	return e
}

// isNotFound reports whether err says that a message is not in its stream.
func isNotFound(err error) bool {
	return apiCode(err) == jetstream.JSErrCodeMessageNotFound || errors.Is(err, jetstream.ErrMsgNotFound)
}

// isStreamGone reports whether err says that the stream does not exist.
func isStreamGone(err error) bool {
	return apiCode(err) == jetstream.JSErrCodeStreamNotFound || errors.Is(err, jetstream.ErrStreamNotFound)
}

func apiCode(err error) jetstream.ErrorCode {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode
	}
	return 0
}
