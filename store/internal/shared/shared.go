// Package shared gathers the store methods that both stores
// (store/postgres and store/sqlite) share apart from SQL, written once in
// store/internal/replays, store/internal/ops and store/internal/alarms:
// a store embeds one Methods over its Backend, and they are its own
// methods.
package shared

import (
	"time"

	"github.com/quarantine-dev/quarantine/store/internal/alarms"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// Backend is what Methods need of a store.
type Backend interface {
	replays.Backend
	ops.Backend
	alarms.Backend
}

// Methods are the replay methods (replays.Methods), the operator actions
// (ops.Methods) and the alarm methods (alarms.Methods) of a store.
type Methods struct {
	replayMethods
	opsMethods
	alarmMethods
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
	return Methods{replays.NewMethods(b, clock), ops.NewMethods(b, clock), alarms.NewMethods(b, clock)}
}
