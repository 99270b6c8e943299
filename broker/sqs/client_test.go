package sqs

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestReceiveResponsesAreNotLost receives a queue dry without SDK
// retries: every call must succeed and return distinct messages. Without
// ownBodyClient a few calls in a hundred failed with "use of closed
// network connection" after goaws had already handed their messages out,
// and a retry left those messages invisible for a visibility timeout.
func TestReceiveResponsesAreNotLost(t *testing.T) {
	t.Parallel()
	const n = 2000
	e := newEnv(t)
	_, url := e.queue("nolost", nil)
	e.send(url, bodies(n, "nolost"), nil)
	seen := map[string]bool{}
	for calls := 0; len(seen) < n; calls++ {
		if calls > n { // 10 per call: n/10 calls suffice
			t.Fatalf("%d calls received only %d of %d messages", calls, len(seen), n)
		}
		out, err := e.client.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		}, func(o *awssqs.Options) { o.RetryMaxAttempts = 1 })
		if err != nil {
			t.Fatalf("call %d (after %d messages): %v", calls, len(seen), err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("call %d got nothing after %d of %d messages: some are invisible", calls, len(seen), n)
		}
		for _, m := range out.Messages {
			if seen[*m.MessageId] {
				t.Fatalf("message %s received twice", *m.MessageId)
			}
			seen[*m.MessageId] = true
		}
	}
}
