// Package alarms holds what both stores' alarm tables (alarm_states and
// alarm_outbox) share apart from SQL: their columns, how a queued
// notification and a delivery attempt become an outbox row, and the
// store methods written once over them (Methods).
package alarms

import (
	"context"
	"encoding/json"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// StateColumns are alarm_states' columns, in the order both stores read
// and write them.
const StateColumns = `alarm, queue, owner, state, since, active_at, notified_at, resent_at,
	reason, age_seconds, depth, inflow_per_minute, updated_at`

// NoteColumns are alarm_outbox's columns, in the order both stores read
// them.
const NoteColumns = `id, receiver, kind, event, created_at, delivery, attempts, next_attempt_at, last_error, delivered_at`

// Queued is what the outbox stores of a new notification n queued at
// now: its event as JSON and when it is first tried (now unless n says).
// EINTERNAL when the event does not encode.
func Queued(n quarantine.AlarmNotification, now time.Time) (event []byte, next time.Time, err error) {
	event, err = json.Marshal(n.Event)
	if err != nil {
		return nil, time.Time{}, quarantine.Internal(err, "cannot encode an alarm event")
	}
	next = n.NextAttemptAt
	if next.IsZero() {
		next = now
	}
	return event, next, nil
}

// Outcome is one delivery attempt as its outbox row keeps it.
type Outcome struct {
	Delivery    quarantine.AlarmDelivery
	Next        time.Time  // the next attempt's time
	DeliveredAt *time.Time // set once delivered
	LastError   string     // sanitized, at most 1024 bytes
}

// Attempt is the outcome of attempt a recorded at now: delivered, given
// up (failed), or pending until a.Next.
func Attempt(a quarantine.AlarmAttempt, now time.Time) Outcome {
	o := Outcome{Delivery: quarantine.AlarmDeliveryPending, Next: a.Next, LastError: quarantine.SanitizeText(a.Err)}
	switch {
	case a.Delivered:
		o.Delivery, o.Next, o.DeliveredAt = quarantine.AlarmDeliveryDelivered, now, &now
	case a.GiveUp:
		o.Delivery, o.Next = quarantine.AlarmDeliveryFailed, now
	}
	if len(o.LastError) > 1024 {
		o.LastError = o.LastError[:1024]
	}
	return o
}

// CheckPending refuses an attempt at notification id whose stored
// delivery is not pending: ECONFLICT.
func CheckPending(id int64, delivery string) error {
	if delivery != string(quarantine.AlarmDeliveryPending) {
		return quarantine.Errorf(quarantine.ECONFLICT, "alarm notification %d is %s", id, delivery)
	}
	return nil
}

// UpsertState is the tail of both stores' INSERT INTO alarm_states
// (StateColumns) VALUES (…): a state already stored for the alarm and
// queue is replaced.
const UpsertState = `ON CONFLICT (alarm, queue) DO UPDATE SET owner = excluded.owner, state = excluded.state,
	since = excluded.since, active_at = excluded.active_at, notified_at = excluded.notified_at,
	resent_at = excluded.resent_at, reason = excluded.reason, age_seconds = excluded.age_seconds,
	depth = excluded.depth, inflow_per_minute = excluded.inflow_per_minute, updated_at = excluded.updated_at`

// Tx is one write transaction of a store as Methods use it.
type Tx interface {
	// SaveState upserts alarm state a (alarm_states, UpsertState),
	// updated at now.
	SaveState(ctx context.Context, a quarantine.AlarmState, now time.Time) error
	// QueueNote appends notification n to the outbox, pending, created at
	// now, its event encoded as event, first tried at next.
	QueueNote(ctx context.Context, n quarantine.AlarmNotification, event []byte, next, now time.Time) error
	// Delivery reads (and locks, where the store locks rows) the delivery
	// of notification id; ENOTFOUND when there is none.
	Delivery(ctx context.Context, id int64) (string, error)
	// SaveAttempt records attempt o at notification id (one more
	// attempt).
	SaveAttempt(ctx context.Context, id int64, o Outcome) error
}

// Backend is what Methods need of a store.
type Backend interface {
	// WriteAlarms runs fn in one write transaction of the store
	// (committed when fn returns nil); what names the work in its errors.
	WriteAlarms(ctx context.Context, what string, fn func(Tx) error) error
	// PendingNotes reads up to limit (positive) pending notifications,
	// by id.
	PendingNotes(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error)
}

// Methods are the methods of store.Alarms that both stores share apart
// from SQL, written once over a store's Backend. A store embeds them
// (through an unexported alias), so that they are its own methods.
type Methods struct {
	b     Backend
	clock func() time.Time
}

// NewMethods returns the Methods of a store over b; clock is the store's
// (UTC, to the microsecond).
func NewMethods(b Backend, clock func() time.Time) Methods { return Methods{b, clock} }

// SaveAlarms upserts states and appends notes to the outbox in one
// transaction; see store.Alarms. Errors: EINVALID for a state or kind
// that does not exist, EUNAVAILABLE, EINTERNAL.
func (m Methods) SaveAlarms(ctx context.Context, states []quarantine.AlarmState, notes []quarantine.AlarmNotification) error {
	if err := quarantine.ValidateAlarms(states, notes); err != nil {
		return err
	}
	now := m.clock()
	return m.b.WriteAlarms(ctx, "save alarm states", func(tx Tx) error {
		for _, a := range states {
			if err := tx.SaveState(ctx, a, now); err != nil {
				return err
			}
		}
		for _, n := range notes {
			ev, next, err := Queued(n, now)
			if err != nil {
				return err
			}
			if err := tx.QueueNote(ctx, n, ev, next, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// PendingAlarmNotifications returns up to limit pending notifications by
// id (100 when limit is not positive); see store.Alarms. Errors:
// EUNAVAILABLE, EINTERNAL.
func (m Methods) PendingAlarmNotifications(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error) {
	if limit <= 0 {
		limit = 100
	}
	return m.b.PendingNotes(ctx, limit)
}

// RecordAlarmDelivery records one attempt at notification id (Attempt),
// the notification read and locked first; see store.Alarms. Errors:
// ENOTFOUND, ECONFLICT when it is not pending, EUNAVAILABLE, EINTERNAL.
func (m Methods) RecordAlarmDelivery(ctx context.Context, id int64, a quarantine.AlarmAttempt) error {
	o := Attempt(a, m.clock())
	return m.b.WriteAlarms(ctx, "record an alarm delivery", func(tx Tx) error {
		cur, err := tx.Delivery(ctx, id)
		if err != nil {
			return err
		}
		if err := CheckPending(id, cur); err != nil {
			return err
		}
		return tx.SaveAttempt(ctx, id, o)
	})
}
