package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// Alarm states and their outbox (migration 0005). SQLite serves one
// process, so the evaluator's lock is a lock in the process, one per
// database file.

const alarmStateColumns = `alarm, queue, owner, state, since, active_at, notified_at, resent_at,
	reason, age_seconds, depth, inflow_per_minute, updated_at`

const alarmNoteColumns = `id, receiver, kind, event, created_at, delivery, attempts, next_attempt_at, last_error, delivered_at`

// AlarmStates returns every stored alarm state, by alarm and queue; see
// store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) AlarmStates(ctx context.Context) ([]quarantine.AlarmState, error) {
	out := []quarantine.AlarmState{}
	err := s.read(ctx, "list alarm states", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+alarmStateColumns+` FROM alarm_states ORDER BY alarm, queue`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a quarantine.AlarmState
			var state string
			var since, updated int64
			var active, notified, resent sql.NullInt64
			if err := rows.Scan(&a.Alarm, &a.Queue, &a.Owner, &state, &since, &active, &notified, &resent,
				&a.Reason, &a.AgeSeconds, &a.Depth, &a.InflowPerMinute, &updated); err != nil {
				return err
			}
			a.State = quarantine.AlarmStatus(state)
			a.Since, a.UpdatedAt = fromMicros(since), fromMicros(updated)
			a.ActiveAt, a.NotifiedAt, a.ResentAt = fromMicrosPtr(active), fromMicrosPtr(notified), fromMicrosPtr(resent)
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SaveAlarms upserts states and appends notes to the outbox in one
// transaction; see store.Alarms. Errors: EINVALID for a state or kind
// that does not exist, EUNAVAILABLE, EINTERNAL.
func (s *Store) SaveAlarms(ctx context.Context, states []quarantine.AlarmState, notes []quarantine.AlarmNotification) error {
	if err := quarantine.ValidateAlarms(states, notes); err != nil {
		return err
	}
	now := s.clock()
	return s.write(ctx, "save alarm states", func(tx *sql.Tx) error {
		for _, a := range states {
			_, err := tx.ExecContext(ctx, `INSERT INTO alarm_states (`+alarmStateColumns+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (alarm, queue) DO UPDATE SET owner = excluded.owner, state = excluded.state,
					since = excluded.since, active_at = excluded.active_at, notified_at = excluded.notified_at,
					resent_at = excluded.resent_at, reason = excluded.reason, age_seconds = excluded.age_seconds,
					depth = excluded.depth, inflow_per_minute = excluded.inflow_per_minute, updated_at = excluded.updated_at`,
				a.Alarm, a.Queue, a.Owner, string(a.State), micros(a.Since), microsPtr(a.ActiveAt), microsPtr(a.NotifiedAt),
				microsPtr(a.ResentAt), a.Reason, a.AgeSeconds, a.Depth, a.InflowPerMinute, micros(now))
			if err != nil {
				return err
			}
		}
		for _, n := range notes {
			ev, err := json.Marshal(n.Event)
			if err != nil {
				return quarantine.Internal(err, "cannot encode an alarm event")
			}
			next := n.NextAttemptAt
			if next.IsZero() {
				next = now
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO alarm_outbox (receiver, kind, event, created_at, delivery, attempts,
				next_attempt_at, last_error, delivered_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, '', NULL)`,
				n.Receiver, string(n.Kind), string(ev), micros(now), micros(next))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// PendingAlarmNotifications returns up to limit pending notifications by
// id; see store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PendingAlarmNotifications(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error) {
	if limit <= 0 {
		limit = 100
	}
	out := []quarantine.AlarmNotification{}
	err := s.read(ctx, "list pending alarm notifications", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+alarmNoteColumns+` FROM alarm_outbox
			WHERE delivery = 'pending' ORDER BY id LIMIT ?`, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n quarantine.AlarmNotification
			var kind, ev, delivery string
			var created, next int64
			var delivered sql.NullInt64
			if err := rows.Scan(&n.ID, &n.Receiver, &kind, &ev, &created, &delivery, &n.Attempts, &next, &n.LastError, &delivered); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(ev), &n.Event); err != nil {
				return err
			}
			n.Kind, n.Delivery = quarantine.AlarmKind(kind), quarantine.AlarmDelivery(delivery)
			n.CreatedAt, n.NextAttemptAt, n.DeliveredAt = fromMicros(created), fromMicros(next), fromMicrosPtr(delivered)
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordAlarmDelivery records one attempt at notification id; see
// store.Alarms. Errors: ENOTFOUND, ECONFLICT when it is not pending,
// EUNAVAILABLE, EINTERNAL.
func (s *Store) RecordAlarmDelivery(ctx context.Context, id int64, a quarantine.AlarmAttempt) error {
	now := s.clock()
	delivery, next, delivered := quarantine.AlarmDeliveryPending, micros(a.Next), any(nil)
	switch {
	case a.Delivered:
		delivery, next, delivered = quarantine.AlarmDeliveryDelivered, micros(now), micros(now)
	case a.GiveUp:
		delivery, next = quarantine.AlarmDeliveryFailed, micros(now)
	}
	errText := quarantine.SanitizeText(a.Err)
	if len(errText) > 1024 {
		errText = errText[:1024]
	}
	return s.write(ctx, "record an alarm delivery", func(tx *sql.Tx) error {
		var cur string
		if err := tx.QueryRowContext(ctx, `SELECT delivery FROM alarm_outbox WHERE id = ?`, id).Scan(&cur); err != nil {
			return orNotFound(err, notfound.AlarmNotification(id))
		}
		if cur != string(quarantine.AlarmDeliveryPending) {
			return quarantine.Errorf(quarantine.ECONFLICT, "alarm notification %d is %s", id, cur)
		}
		_, err := tx.ExecContext(ctx, `UPDATE alarm_outbox SET delivery = ?, attempts = attempts + 1, next_attempt_at = ?,
			last_error = ?, delivered_at = ? WHERE id = ?`, string(delivery), next, errText, delivered, id)
		return err
	})
}

// PurgeAlarmNotifications deletes the delivered and failed notifications
// queued before before; see store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeAlarmNotifications(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, "purge alarm notifications", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM alarm_outbox WHERE delivery <> 'pending' AND created_at < ?`, micros(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// alarmLocks holds, per database file, whether an evaluator of this
// process holds the alarms.
var alarmLocks sync.Map // path -> *sync.Mutex

// LockAlarms takes the process's lock on this database's alarms;
// ECONFLICT while another evaluator holds it.
func (s *Store) LockAlarms(ctx context.Context) (quarantine.AlarmLock, error) {
	m, _ := alarmLocks.LoadOrStore(s.path, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return nil, quarantine.Errorf(quarantine.ECONFLICT, "another evaluator holds the alarms")
	}
	return &alarmLock{mu: mu}, nil
}

type alarmLock struct {
	once sync.Once
	mu   *sync.Mutex
	gone atomic.Bool
}

func (l *alarmLock) Check(context.Context) error {
	if l.gone.Load() {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "the alarm lock was released")
	}
	return nil
}

func (l *alarmLock) Release() {
	l.once.Do(func() { l.gone.Store(true); l.mu.Unlock() })
}
