package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
)

// runningAlarms is the alarm evaluator of one serve.
type runningAlarms struct {
	cancel    context.CancelFunc
	done      chan struct{}
	evaluator *alert.Evaluator
}

// startAlarms registers the message and alarm gauges on reg and, when
// alarms are configured, starts the evaluator in the background. It only
// evaluates while it holds the store's alarm lock: with several instances
// on one PostgreSQL, one of them does.
func (m *Main) startAlarms(reg prometheus.Registerer) error {
	owner := func(q string) string { return quarantine.AssignOwner(m.Config.Owners, q) }
	alert.RegisterGauges(reg, m.store, owner, nil)
	if len(m.Config.Alarms.Rules) == 0 {
		return nil
	}
	e, err := alert.New(alert.Config{
		Store: m.store, Rules: m.Config.Alarms.Rules, Receivers: m.Config.Alarms.Receivers,
		Owner: owner, Interval: m.Config.Alarms.Interval, Logger: m.logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAlarms{cancel: cancel, done: make(chan struct{}), evaluator: e}
	m.alarms = ra
	go func() {
		defer close(ra.done)
		_ = e.Run(ctx)
	}()
	return nil
}

// stop ends the evaluator (it releases the alarm lock) and waits for it.
func (ra *runningAlarms) stop() {
	if ra == nil {
		return
	}
	ra.cancel()
	<-ra.done
}
