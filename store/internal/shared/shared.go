// Package shared gathers the store methods that both stores
// (store/postgres and store/sqlite) share apart from SQL, written once in
// store/internal/replays, store/internal/ops and store/internal/alarms:
// a store embeds one Methods over its Backend, and they are its own
// methods.
package shared

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"

	"github.com/quarantine-dev/quarantine/store/internal/alarms"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
	"github.com/quarantine-dev/quarantine/store/internal/sampling"
)

// Backend is what Methods need of a store.
type Backend interface {
	replays.Backend
	ops.Backend
	alarms.Backend
	// SampleLimits are the thresholds of the store's samples (tests
	// lower them).
	SampleLimits() sampling.Limits
	// SampleSource reads a sample of the messages matching f.
	SampleSource(f quarantine.Filter) sampling.Source
	// Translate turns an error of the store's driver into a
	// *quarantine.Error (the store's one table of them); what says what
	// the store was doing.
	Translate(err error, what string) error
}

// Methods are the replay methods (replays.Methods), the operator actions
// (ops.Methods), the alarm methods (alarms.Methods) and the sample of a
// store.
type Methods struct {
	replayMethods
	opsMethods
	alarmMethods
	b Backend
}

// The aliases name the embedded fields apart.
type (
	replayMethods = replays.Methods
	opsMethods    = ops.Methods
	alarmMethods  = alarms.Methods
)

// New returns the Methods of a store over b; clock is the store's (UTC,
// to the microsecond).
func New(b Backend, clock func() time.Time) Methods {
	return Methods{replays.NewMethods(b, clock), ops.NewMethods(b, clock), alarms.NewMethods(b, clock), b}
}

// Sample returns a random sample of the messages matching r.Filter,
// ordered newest first like a list (sampling.Sample over the store's
// sources); see store.Store. Errors: EINVALID naming the field,
// EUNAVAILABLE, EINTERNAL.
func (m Methods) Sample(ctx context.Context, r quarantine.SampleRequest) ([]*quarantine.Message, error) {
	out, err := sampling.Sample(ctx, r, m.b.SearchReady, m.b.SampleLimits(), m.b.SampleSource)
	return out, m.b.Translate(err, "sample messages")
}
