package rabbitmq

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// A full queue with x-overflow reject-publish nacks what it cannot take:
// those messages are pending and Refused (the engine offers them again, a
// bounded number of times), not failed at once, and not published; what
// the queue took is published. Once the queue has room, the same messages
// go through.
func TestPublishFullQueueIsRefusedForNow(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	q := b.declare(b.name("full"), amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	p := testPublisher(t)
	msgs := outgoing("full", q, 0, 5, 100)

	res := p.Publish(context.Background(), msgs)
	published, refused := 0, 0
	for i, r := range res {
		switch {
		case r.Outcome == quarantine.ItemPublished:
			published++
		case r.Outcome == quarantine.ItemPending && r.Refused && quarantine.ErrorCode(r.Err) == quarantine.EUNAVAILABLE:
			refused++
		default:
			t.Fatalf("message %d: %s (refused %v) %v; want published or refused for now", i, r.Outcome, r.Refused, r.Err)
		}
	}
	if published != 2 || refused != 3 {
		t.Fatalf("%d published and %d refused; want the 2 the queue holds and 3 refused", published, refused)
	}
	b.waitDepth(q, 2)
	b.consume(q, 2) // room again
	var retry []replay.Outgoing
	for i, r := range res {
		if r.Outcome == quarantine.ItemPending && len(retry) < 2 {
			retry = append(retry, msgs[i])
		}
	}
	for k, r := range p.Publish(context.Background(), retry) {
		if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("offered again with room, %s: %s %v", retry[k].MessageID, r.Outcome, r.Err)
		}
	}
	b.waitDepth(q, 2)
}
