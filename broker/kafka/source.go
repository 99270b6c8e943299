package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

var _ collect.Source = (*Source)(nil)

// maxBatch caps one Receive.
const maxBatch = 10000

// Source drains dead-letter topics through a consumer group for the
// collector loop. It makes its client lazily, on the first Receive; the
// client reconnects by itself.
//
// Offsets are committed by Ack only, synchronously, and never past a
// record that is not stored (see ledger): autocommit is off. When the group
// takes partitions away, the offsets stored so far are committed before
// they go; deliveries of those partitions still in flight are then
// ignored by Ack, and their new owner reads them again (deduplicated by
// the store).
type Source struct {
	name string
	cfg  Config
	log  *slog.Logger
	dec  decoder

	ledger *ledger
	// poll bounds one wait for records; after it, an idle source checks
	// that a broker answers.
	poll time.Duration

	conn lazyClient
}

// NewSource returns the source of the collector named name. It does not
// dial: the first Receive does. Errors are EINVALID: c is not valid
// (c.Validate), or the environment variable c.InstanceIDEnv names is not
// set or holds no valid instance id.
func NewSource(name string, c Config, logger *slog.Logger) (*Source, error) {
	logger, err := collect.CheckSource(name, c.Validate(), logger)
	if err != nil {
		return nil, err
	}
	c, err = c.withDefaults(name).withInstanceID(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return &Source{
		name:   name,
		cfg:    c,
		log:    logger.With("component", "kafka", "collector", name),
		dec:    decoder{source: name, sourceTopic: c.SourceTopic},
		ledger: newLedger(),
		poll:   5 * time.Second,
	}, nil
}

// Config returns the source's configuration with its defaults filled.
func (s *Source) Config() Config { return s.cfg }

// client returns the consumer, making it on first use.
func (s *Source) client() (*kgo.Client, error) {
	return s.conn.get("source", func() (*kgo.Client, error) {
		instanceID := ""
		if s.cfg.InstanceID != nil {
			instanceID = *s.cfg.InstanceID
		}
		opts := append([]kgo.Opt{
			kgo.ConsumerGroup(s.cfg.Group),
			kgo.ConsumeTopics(s.cfg.Topics...),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.OnPartitionsRevoked(s.revoked),
			kgo.OnPartitionsLost(s.lost),
			kgo.WithLogger(kgoLogger{s.log}),
		}, groupOpts(instanceID, s.cfg.SessionTimeout)...)
		cl, err := s.cfg.newClient("client", opts...)
		if err == nil {
			s.log.Info("consuming", "config", s.cfg)
		}
		return cl, err
	})
}

// revoked commits what was stored of the partitions that go, then forgets
// them.
func (s *Source) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	offsets := s.ledger.drop(parts)
	if len(offsets) == 0 {
		return
	}
	if err := commit(ctx, cl, offsets); err != nil {
		s.log.Warn("could not commit the stored offsets of revoked partitions: their new owner reads them again", "err", err)
	}
}

// lost forgets partitions the group took away without a revoke (the
// member was fenced): a commit would fail.
func (s *Source) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	s.ledger.drop(parts)
}

// Receive returns the next records: up to max deliveries, waiting at most
// linger after the first for more. It blocks until one is available or
// ctx ends. A record that cannot be decoded is delivered raw and flagged,
// never an error. Errors are EUNAVAILABLE when no record came and the
// client reported a fetch error (a topic is not there or not readable),
// or when nothing came for a while and no broker answers a ping (the
// cluster cannot be reached, or refuses the credentials).
func (s *Source) Receive(ctx context.Context, limit int, linger time.Duration) ([]collect.Delivery, error) {
	limit = min(max(limit, 1), maxBatch)
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	for len(recs) == 0 {
		pctx, cancel := context.WithTimeout(ctx, s.poll)
		fs := cl.PollRecords(pctx, limit)
		cancel()
		if cl.Context().Err() != nil {
			return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: the source is closed")
		}
		var ferr error
		recs, ferr = records(fs)
		if len(recs) > 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if ferr != nil {
			return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: ferr, Message: "kafka: fetch failed"}
		}
		// Nothing for a while: say so if no broker answers (unreachable,
		// authentication refused), which the client only retries.
		pctx, cancel = context.WithTimeout(ctx, s.poll)
		err := cl.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "kafka: no broker answers"}
		}
	}
	if len(recs) < limit && linger > 0 {
		lctx, cancel := context.WithTimeout(ctx, linger)
		for len(recs) < limit && lctx.Err() == nil {
			more, _ := records(cl.PollRecords(lctx, limit-len(recs)))
			recs = append(recs, more...)
		}
		cancel()
	}
	ds := make([]collect.Delivery, len(recs))
	for i, r := range recs {
		ds[i] = collect.Delivery{Message: s.dec.decode(r), Handle: s.ledger.handOut(r)}
	}
	return ds, nil
}

// records returns the records of fs and its first error other than a
// context's end.
func records(fs kgo.Fetches) ([]*kgo.Record, error) {
	var first error
	fs.EachError(func(t string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			first = fmt.Errorf("topic %s partition %d: %w", t, p, err)
		}
	})
	return fs.Records(), first
}

// Ack marks ds stored and commits, synchronously, the offsets that moved:
// for each partition, the offset after the longest run of stored records.
// An error (EUNAVAILABLE) says the commit was not confirmed; the records
// are then read again after a restart or rebalance, and deduplicated.
func (s *Source) Ack(ctx context.Context, ds []collect.Delivery) error {
	ms, err := collect.Handles[mark](ds, "kafka")
	if err != nil {
		return err
	}
	offsets := s.ledger.stored(ms)
	if len(offsets) == 0 {
		return nil
	}
	cl := s.conn.current()
	if cl == nil {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: the source is closed")
	}
	if err := commit(ctx, cl, offsets); err != nil {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "kafka: offset commit not confirmed; the records will be read again"}
	}
	s.ledger.committed(offsets)
	return nil
}

// commit commits offsets and returns the first error of the request or
// of any partition.
func commit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var rerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && rerr == nil {
					rerr = fmt.Errorf("topic %s partition %d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return rerr
}

// Close leaves the group (committing what was stored of its partitions)
// and closes the client. Records not stored are read again by the next
// owner of their partition.
func (s *Source) Close() error {
	if cl := s.conn.close(false); cl != nil {
		cl.Close()
	}
	s.ledger.dropAll()
	return nil
}

// kgoLogger sends the client's warnings and errors to slog.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, kv...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, kv...)
	default:
		l.log.Debug(msg, kv...)
	}
}
