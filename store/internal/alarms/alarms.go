// Package alarms holds what both stores' alarm tables (alarm_states and
// alarm_outbox) share apart from SQL: their columns, and how a queued
// notification and a delivery attempt become an outbox row.
package alarms

import (
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
