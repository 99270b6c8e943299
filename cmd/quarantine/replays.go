package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine/replay"
)

// runningReplays is the replay engine of one serve and the publishers it
// publishes through.
type runningReplays struct {
	cancel     context.CancelFunc
	done       chan struct{}
	publishers []replay.Publisher
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
			p, err := newHTTPDestination(d)
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

// readTokenFile returns the token in path, without surrounding space.
func readTokenFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read token_file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// startReplays starts the replay engine in the background.
func (m *Main) startReplays(reg prometheus.Registerer, deps collectorDeps) error {
	routes, pubs, err := m.routes(deps)
	rr := &runningReplays{publishers: pubs, done: make(chan struct{})}
	m.replays = rr
	if err != nil {
		close(rr.done)
		return err
	}
	eng := replay.New(replay.Config{
		Store:   m.store,
		Router:  routes,
		Lease:   m.Config.Replay.Lease,
		Poll:    m.Config.Replay.Poll,
		Logger:  m.logger,
		Metrics: replay.NewMetrics(reg),
	})
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

// newHTTPDestination is replaced when broker/webhook lands.
func newHTTPDestination(d *DestinationConfig) (replay.Publisher, error) {
	return nil, errors.New("http destinations are not wired yet")
}
