package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/webhook"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store"
)

// runningReplays is the replay engine of one serve and the publishers it
// publishes through.
type runningReplays struct {
	cancel     context.CancelFunc
	done       chan struct{}
	publishers []replay.Publisher
	engine     *replay.Engine
	routes     *replay.Routes
}

// routeCheck asks the engine's routes where a message would go, for the
// undeliverable messages of a dry run (nil when no engine runs).
func (rr *runningReplays) routeCheck() quarantine.RouteCheck {
	if rr == nil || rr.routes == nil {
		return nil
	}
	return func(b *quarantine.ReplayBatch, m *quarantine.Message) error {
		_, err := rr.routes.Route(b, m)
		return err
	}
}

// wakingStore is the store as the API and the UI use it: a batch they
// create, start or resume wakes this serve's engine, which starts it at
// once instead of at its next poll.
type wakingStore struct {
	store.Store
	engine *replay.Engine
}

func (w wakingStore) CreateReplay(ctx context.Context, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (*quarantine.ReplayBatch, error) {
	b, err := w.Store.CreateReplay(ctx, r, keyRule)
	if err == nil {
		w.engine.Wake()
	}
	return b, err
}

func (w wakingStore) ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error) {
	b, err := w.Store.ChangeReplay(ctx, c)
	if err == nil {
		w.engine.Wake()
	}
	return b, err
}

// wrap returns st waking the engine (st itself when none runs).
func (rr *runningReplays) wrap(st store.Store) store.Store {
	if rr == nil || rr.engine == nil {
		return st
	}
	return wakingStore{Store: st, engine: rr.engine}
}

// routes builds the Router of the configuration: one publisher per
// collector (dialling lazily) and one per http destination.
func (m *Main) routes(deps collectorDeps) (*replay.Routes, []replay.Publisher, error) {
	r := &replay.Routes{Brokers: map[string]replay.Broker{}}
	var pubs []replay.Publisher
	for _, cc := range m.Config.Collectors {
		if cc.publisher == nil {
			continue
		}
		p, err := cc.publisher(deps)
		if err != nil {
			return nil, pubs, fmt.Errorf("collector %s: replay publisher: %w", cc.Name, err)
		}
		pubs = append(pubs, p)
		r.Brokers[cc.Name] = replay.Broker{Name: cc.Name, Kind: cc.Kind, Publisher: p}
	}
	for i := range m.Config.Destinations {
		d := &m.Config.Destinations[i]
		o := replay.Override{Queues: d.Queues, Collector: d.Collector}
		if d.Collector == "" {
			p, err := newHTTPDestination(d, d.destinationName(i), deps)
			if err != nil {
				return nil, pubs, fmt.Errorf("destinations[%d]: %w", i, err)
			}
			pubs = append(pubs, p)
			o.Name, o.Kind, o.Publisher = d.destinationName(i), d.Kind, p
		}
		r.Overrides = append(r.Overrides, o)
	}
	return r, pubs, nil
}

// collectorNames lists the configured collectors, the possible
// destination.collector of a replay.
func (m *Main) collectorNames() []string {
	names := make([]string, 0, len(m.Config.Collectors))
	for _, c := range m.Config.Collectors {
		names = append(names, c.Name)
	}
	return names
}

// startReplays starts the replay engine in the background.
func (m *Main) startReplays(reg prometheus.Registerer, deps collectorDeps) error {
	routes, pubs, err := m.routes(deps)
	rr := &runningReplays{publishers: pubs, done: make(chan struct{}), routes: routes}
	m.replays = rr
	if err != nil {
		close(rr.done)
		return err
	}
	eng := replay.New(replay.Config{
		Store:           m.store,
		Router:          routes,
		Lease:           m.Config.Replay.Lease,
		Poll:            m.Config.Replay.Poll,
		PublishAttempts: m.Config.Replay.PublishAttempts,
		RetryMin:        m.Config.Replay.RetryMin,
		RetryMax:        m.Config.Replay.RetryMax,
		Logger:          m.logger,
		Metrics:         replay.NewMetrics(reg),
		Guard:           rules.ReplayDefaults{IncidentWindow: m.Config.Replay.IncidentWindow, IncidentRate: m.Config.Replay.IncidentRate}.Guard(),
	})
	rr.engine = eng
	replay.RegisterBatchGauge(reg, m.store)
	ctx, cancel := context.WithCancel(context.Background())
	rr.cancel = cancel
	go func() {
		defer close(rr.done)
		_ = eng.Run(ctx)
	}()
	return nil
}

// stop ends the engine (it gives back what it leased and did not
// publish) and closes the publishers.
func (rr *runningReplays) stop() error {
	if rr == nil {
		return nil
	}
	if rr.cancel != nil {
		rr.cancel()
	}
	<-rr.done
	var errs []error
	for _, p := range rr.publishers {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// newHTTPDestination builds the publisher of an http (or cloudflare)
// destination: a POST of the canonical envelope.
func newHTTPDestination(d *DestinationConfig, name string, deps collectorDeps) (replay.Publisher, error) {
	return webhook.NewPublisher(webhook.Config{URL: d.URL, Token: strings.TrimSpace(d.Token.Reveal()), TokenFile: d.TokenFile, Timeout: d.timeout}, name, deps.logger)
}
