package sqs

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/backoff"
)

// Backoff bounds of a receiver whose calls fail.
const (
	receiverMinBackoff = 200 * time.Millisecond
	receiverMaxBackoff = 10 * time.Second
)

// receiver long-polls the queue until ctx ends, handing each non-empty
// batch (or each error) to Receive. It holds at most one batch: it polls
// again only once Receive has taken the last one. Its ReceiveMessage
// calls run under calls, which Close cancels only after a grace, so that
// a poll in flight when ctx ends can finish; what a receiver holds when it
// stops goes to pending, which Close releases once every poll has ended.
func (s *Source) receiver(ctx, calls context.Context) {
	defer s.wg.Done()
	failures := 0
	for ctx.Err() == nil {
		msgs, err := s.receiveOnce(calls)
		if ctx.Err() != nil {
			s.keep(msgs)
			return
		}
		if err != nil {
			failures++
			if !s.hand(ctx, poll{err: err}) {
				return
			}
			backoff.Sleep(ctx, collect.Backoff(failures, receiverMinBackoff, receiverMaxBackoff))
			continue
		}
		failures = 0
		if len(msgs) > 0 && !s.hand(ctx, poll{msgs: msgs}) {
			s.keep(msgs)
			return
		}
	}
}

// keep adds the batch a stopping receiver holds to pending, for Close to
// release.
func (s *Source) keep(msgs []held) {
	if len(msgs) == 0 {
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, msgs...)
	s.mu.Unlock()
}

// receiveOnce makes one ReceiveMessage call.
func (s *Source) receiveOnce(ctx context.Context) ([]held, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WaitTime+15*time.Second)
	defer cancel()
	out, err := s.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(s.cfg.QueueURL),
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             int32(s.cfg.WaitTime / time.Second),
		VisibilityTimeout:           int32(s.cfg.VisibilityTimeout / time.Second),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, translate("receive", err)
	}
	now := s.now()
	hs := make([]held, len(out.Messages))
	for i, m := range out.Messages {
		hs[i] = held{msg: m, at: now}
	}
	return hs, nil
}

// hand gives p to Receive; false when ctx ended first.
func (s *Source) hand(ctx context.Context, p poll) bool {
	if len(p.msgs) > 0 {
		s.waiting.Add(1)
		defer s.waiting.Add(-1)
	}
	select {
	case s.polls <- p:
		return true
	case <-ctx.Done():
		return false
	}
}
