package rabbitmq

import (
	"os"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/collect"
)

// EnvRestart enables the test that stops and starts the RabbitMQ node
// itself (rabbitmqctl stop_app / start_app). It disturbs every other user
// of the broker, so it runs only when asked, and not in parallel.
// TestCollectorReconnectsWhenTheBrokerClosesTheConnection covers the same
// reconnect path on every run without stopping the broker.
const EnvRestart = "QUARANTINE_TEST_RABBITMQ_RESTART"

func TestCollectorSurvivesBrokerRestart(t *testing.T) {
	if os.Getenv(EnvRestart) != "1" {
		t.Skipf("set %s=1 to stop and start the shared RabbitMQ node", EnvRestart)
	}
	const n = 3000
	b := newBroker(t)
	dlq := b.failureQueue(nil)
	published := numbered("restart", n, nil)
	b.publish(dlq, published...)
	st := testStore(t)
	src := testSource(t, "restart", dlq, nil)
	c, stop := runCollector(t, "restart", src, slowStore{st, 50 * time.Millisecond}, 50)
	waitStored(t, c, n/3, 30*time.Second)

	rabbitmqctl(t, "stop_app")
	restarted := false
	defer func() {
		if !restarted {
			rabbitmqctl(t, "start_app")
		}
	}()
	time.Sleep(2 * time.Second)
	rabbitmqctl(t, "start_app")
	restarted = true
	rabbitmqctl(t, "await_startup")

	b = newBroker(t) // the setup connection died with the node
	waitStored(t, c, n, 90*time.Second)
	stop()
	b.waitDepth(dlq, 0)
	exactlyOnce(t, st, "restart", bodiesOf(published))
	if s := c.Stats(); s.Errors[collect.ErrReceive] == 0 {
		t.Fatalf("no receive error while the broker was down: %+v", s)
	}
}
