package rabbitmq

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/collect"
)

// TestCollectorSurvivesBrokerRestart stops and starts a RabbitMQ node of
// its own (a private node on other ports, so the shared broker is not
// disturbed) under a collector draining it: every message is stored
// exactly once and the failure queue ends empty.
// TestCollectorReconnectsWhenTheBrokerClosesTheConnection covers the
// same reconnect path on the shared broker.
func TestCollectorSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	node := startPrivateNode(t)
	const n = 3000
	b := newBrokerAt(t, node.url)
	dlq := b.failureQueue(nil)
	published := numbered("restart", n, nil)
	b.publish(dlq, published...)
	st := testStore(t)
	src := testSource(t, "restart", dlq, func(c *Config) { c.URL = node.url })
	c, stop := runCollector(t, "restart", src, slowStore{st, 50 * time.Millisecond}, 50)
	waitStored(t, c, n/3, 30*time.Second)

	node.mustCtl("stop_app")
	// The collector sees the broker gone before it comes back.
	for deadline := time.Now().Add(30 * time.Second); c.Stats().Errors[collect.ErrReceive] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no receive error while the broker was down: %+v", c.Stats())
		}
	}
	node.mustCtl("start_app")
	node.awaitStartup()

	b = newBrokerAt(t, node.url) // the setup connection died with the node
	waitStored(t, c, n, 90*time.Second)
	stop()
	b.waitDepth(dlq, 0)
	exactlyOnce(t, st, "restart", bodiesOf(published))
}
