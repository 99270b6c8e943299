package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/backoff"
)

const (
	// batchMax is SQS's limit of entries per batch call.
	batchMax = 10
	// ackParallel bounds concurrent DeleteMessageBatch calls of one Ack.
	ackParallel = 4
	// extendParallel bounds concurrent ChangeMessageVisibility calls.
	extendParallel = 16
	// deleteAttempts bounds the tries of one chunk's entries.
	deleteAttempts = 4
)

// Ack deletes the messages of ds from the queue with DeleteMessageBatch,
// 10 at a time, several chunks at once. Entries that fail on the server's
// side, or that the reply does not mention, are retried; entries refused
// as the sender's fault (a receipt handle that expired because the
// message was received again, say) cannot be. Ack returns an EUNAVAILABLE
// *quarantine.Error counting the messages whose deletion was not
// confirmed: they are redelivered, and the store's dedupe key makes the
// redelivery a no-op.
func (s *Source) Ack(ctx context.Context, ds []collect.Delivery) error {
	entries := make([]string, 0, len(ds))
	for _, d := range ds {
		h, ok := d.Handle.(handle)
		if !ok || h.receipt == "" {
			return quarantine.Errorf(quarantine.EINVALID, "sqs: Ack got a delivery this source did not make")
		}
		entries = append(entries, h.receipt)
	}
	failed, err := s.forChunks(ctx, entries, batchMax, ackParallel, s.deleteChunk)
	if failed == 0 {
		return nil
	}
	return &quarantine.Error{Code: quarantine.EUNAVAILABLE,
		Message: fmt.Sprintf("sqs: %d of %d deletions not confirmed: those messages will be redelivered and deduplicated", failed, len(entries)),
		Err:     err}
}

// forChunks runs f on chunks of at most size receipts, parallel at a
// time, and sums the receipts f could not settle; err is the first cause.
func (s *Source) forChunks(ctx context.Context, receipts []string, size, parallel int, f func(context.Context, []string) (int, error)) (int, error) {
	var (
		mu     sync.Mutex
		failed int
		first  error
		wg     sync.WaitGroup
		sem    = make(chan struct{}, parallel)
	)
	for lo := 0; lo < len(receipts); lo += size {
		chunk := receipts[lo:min(lo+size, len(receipts))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := f(ctx, chunk)
			if n > 0 {
				mu.Lock()
				failed += n
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, first
}

// deleteChunk deletes up to batchMax messages, retrying what may succeed
// on a second try. It returns how many deletions stay unconfirmed.
func (s *Source) deleteChunk(ctx context.Context, receipts []string) (int, error) {
	remaining := make(map[string]string, len(receipts)) // entry id -> receipt handle
	for i, r := range receipts {
		remaining[strconv.Itoa(i)] = r
	}
	var lastErr error
	refused := 0
	for attempt := 1; len(remaining) > 0 && attempt <= deleteAttempts; attempt++ {
		if attempt > 1 {
			backoff.Sleep(ctx, collect.Backoff(attempt-1, 100*time.Millisecond, 2*time.Second))
			if ctx.Err() != nil {
				break
			}
		}
		in := &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.cfg.QueueURL)}
		for id, r := range remaining {
			in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(id), ReceiptHandle: aws.String(r)})
		}
		out, err := s.client.DeleteMessageBatch(ctx, in)
		if err != nil {
			lastErr = translate("delete", err)
			continue
		}
		for _, e := range out.Successful {
			delete(remaining, deref(e.Id))
		}
		for _, e := range out.Failed {
			id := deref(e.Id)
			if _, ok := remaining[id]; !ok {
				continue
			}
			lastErr = fmt.Errorf("sqs: delete entry refused: %s: %s", deref(e.Code), deref(e.Message))
			if e.SenderFault {
				delete(remaining, id)
				refused++
			}
		}
		if len(remaining) > 0 && lastErr == nil {
			lastErr = errors.New("sqs: the delete reply did not mention every entry")
		}
	}
	return len(remaining) + refused, lastErr
}

// ExtendEvery is how often the collector renews the visibility of a batch
// it holds: a third of the visibility timeout.
func (s *Source) ExtendEvery() time.Duration { return s.cfg.VisibilityTimeout / 3 }

// Extend renews the visibility timeout of ds (ChangeMessageVisibility per
// message: goaws has no batch variant). It returns an EUNAVAILABLE
// *quarantine.Error counting the messages it could not extend; those may
// be redelivered while held, which the dedupe key makes harmless.
func (s *Source) Extend(ctx context.Context, ds []collect.Delivery) error {
	receipts := make([]string, 0, len(ds))
	for _, d := range ds {
		if h, ok := d.Handle.(handle); ok && h.receipt != "" {
			receipts = append(receipts, h.receipt)
		}
	}
	return s.changeVisibility(ctx, receipts, s.cfg.VisibilityTimeout)
}

// changeVisibility sets the visibility timeout of each receipt to d.
func (s *Source) changeVisibility(ctx context.Context, receipts []string, d time.Duration) error {
	secs := int32(d / time.Second)
	size := max(1, (len(receipts)+extendParallel-1)/extendParallel)
	failed, err := s.forChunks(ctx, receipts, size, extendParallel, func(ctx context.Context, chunk []string) (int, error) {
		n := 0
		var first error
		for _, r := range chunk {
			_, err := s.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(s.cfg.QueueURL), ReceiptHandle: aws.String(r), VisibilityTimeout: secs,
			})
			if err != nil {
				n++
				if first == nil {
					first = translate("change visibility", err)
				}
			}
		}
		return n, first
	})
	if failed == 0 {
		return nil
	}
	return &quarantine.Error{Code: quarantine.EUNAVAILABLE,
		Message: fmt.Sprintf("sqs: visibility of %d of %d messages not changed", failed, len(receipts)),
		Err:     err}
}
