package main

import (
	"cmp"
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
)

// runningAlarms is the alarm evaluator (nil without alarms) and the age
// sampler of one serve.
type runningAlarms struct {
	cancel    context.CancelFunc
	done      chan struct{}
	evaluator *alert.Evaluator
	sampler   *alert.AgeSampler
	running   int // loops that signal done
}

// startAlarms registers the message and alarm gauges on reg, starts the
// age sampler (the overview's age history, with or without alarms) and,
// when alarms are configured, the evaluator in the background. It only
// evaluates while it holds the store's alarm lock: with several instances
// on one PostgreSQL, one of them does.
func (m *Main) startAlarms(reg prometheus.Registerer) error {
	owner := func(q string) string { return quarantine.AssignOwner(m.Config.Owners, q) }
	alert.RegisterGauges(reg, m.store, owner, nil)
	var e *alert.Evaluator
	if len(m.Config.Alarms.Rules) > 0 {
		var err error
		e, err = alert.New(alert.Config{
			Store: m.store, Rules: m.Config.Alarms.Rules, Receivers: m.Config.Alarms.Receivers,
			Owner: owner, Interval: m.Config.Alarms.Interval, Logger: m.logger,
			PublicURL: cmp.Or(m.Config.PublicURL, m.URL()), RunbookURL: m.Config.RunbookURL,
		})
		if err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAlarms{cancel: cancel, done: make(chan struct{}, 2), evaluator: e,
		sampler: alert.NewAgeSampler(alert.AgeSamplerConfig{Store: m.store, Logger: m.logger})}
	m.alarms = ra
	loops := []func(context.Context) error{ra.sampler.Run}
	if e != nil {
		loops = append(loops, e.Run)
	}
	ra.running = len(loops)
	for _, run := range loops {
		go func() {
			defer func() { ra.done <- struct{}{} }()
			_ = run(ctx)
		}()
	}
	return nil
}

// stop ends the evaluator (it releases the alarm lock) and the sampler,
// and waits for them.
func (ra *runningAlarms) stop() {
	if ra == nil {
		return
	}
	ra.cancel()
	for range ra.running {
		<-ra.done
	}
}
