package replay

import (
	"path"

	"github.com/quarantine-dev/quarantine"
)

// Route is where one message of a batch goes.
type Route struct {
	Publisher Publisher
	Queue     string // the destination queue, subject or queue name
	// Label names the destination for items, metrics and the shared rate
	// budget: "kind:name/queue", like "rabbitmq:orders-rmq/orders".
	Label string
}

// Router picks the destination of each replayed message.
type Router interface {
	// Route returns where m goes in batch b, or an error (EUNPROCESSABLE,
	// user-safe) that fails the item.
	Route(b *quarantine.ReplayBatch, m *quarantine.Message) (Route, error)
}

// Broker is a configured collector's broker, as a destination.
type Broker struct {
	Name      string // the collector's name
	Kind      string // rabbitmq, sqs, nats
	Publisher Publisher
}

// Override sends the replays of some queues elsewhere (the `destinations:`
// configuration): through another collector's broker, or to a publisher of
// its own (an HTTP receiver).
type Override struct {
	Queues    []string // globs, as path.Match
	Collector string   // publish through this collector's broker
	// Name, Kind and Publisher: a destination of its own (Collector empty).
	Name      string
	Kind      string
	Publisher Publisher
}

func (o *Override) matches(queue string) bool {
	for _, p := range o.Queues {
		if ok, _ := path.Match(p, queue); ok {
			return true
		}
	}
	return false
}

// Routes is the Router of the configuration. The default destination of a
// message is the broker of the collector it came from, and its own queue;
// the first Override matching the queue replaces the broker; a batch's
// destination replaces the queue, the broker, or both.
type Routes struct {
	Brokers   map[string]Broker // by collector name
	Overrides []Override
}

var _ Router = (*Routes)(nil)

// Route implements Router.
func (r *Routes) Route(b *quarantine.ReplayBatch, m *quarantine.Message) (Route, error) {
	queue := m.Queue
	if b.Destination.Queue != "" {
		queue = b.Destination.Queue
	}
	if queue == "" {
		return Route{}, quarantine.Errorf(quarantine.EUNPROCESSABLE, "the message names no queue: replay it with a destination queue")
	}
	if b.Destination.Collector != "" {
		return r.broker(b.Destination.Collector, queue)
	}
	for i := range r.Overrides {
		o := &r.Overrides[i]
		if !o.matches(queue) {
			continue
		}
		if o.Collector != "" {
			return r.broker(o.Collector, queue)
		}
		return Route{Publisher: o.Publisher, Queue: queue, Label: o.Kind + ":" + o.Name + "/" + queue}, nil
	}
	if m.SourceKind == quarantine.SourceHTTP {
		return Route{}, quarantine.Errorf(quarantine.EUNPROCESSABLE,
			"the message came through HTTP ingest, which cannot publish: configure a destination for queue %s, or replay it with destination.collector", queue)
	}
	return r.broker(m.Source, queue)
}

func (r *Routes) broker(name, queue string) (Route, error) {
	br, ok := r.Brokers[name]
	if !ok || br.Publisher == nil {
		return Route{}, quarantine.Errorf(quarantine.EUNPROCESSABLE, "no collector named %q is configured to publish through", name)
	}
	return Route{Publisher: br.Publisher, Queue: queue, Label: br.Kind + ":" + br.Name + "/" + queue}, nil
}
