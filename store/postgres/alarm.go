package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// Alarm states and their outbox (migration 0004). Several instances may
// share the database: LockAlarms makes one of them the evaluator with a
// session advisory lock whose key is derived from the schema, so that
// stores in other schemas of the same database do not contend.

const alarmStateColumns = `alarm, queue, owner, state, since, active_at, notified_at, resent_at,
	reason, age_seconds, depth, inflow_per_minute, updated_at`

const alarmNoteColumns = `id, receiver, kind, event, created_at, delivery, attempts, next_attempt_at, last_error, delivered_at`

// alarmLockKey is the advisory lock key of the current schema's alarms.
const alarmLockKey = `hashtextextended(current_schema() || '.quarantine.alarms', 0)`

// AlarmStates returns every stored alarm state, by alarm and queue; see
// store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) AlarmStates(ctx context.Context) ([]quarantine.AlarmState, error) {
	out := []quarantine.AlarmState{}
	err := s.inTx(ctx, "list alarm states", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+alarmStateColumns+` FROM alarm_states ORDER BY alarm, queue`)
		if err != nil {
			return err
		}
		var a quarantine.AlarmState
		var state string
		_, err = pgx.ForEachRow(rows, []any{&a.Alarm, &a.Queue, &a.Owner, &state, &a.Since, &a.ActiveAt, &a.NotifiedAt, &a.ResentAt,
			&a.Reason, &a.AgeSeconds, &a.Depth, &a.InflowPerMinute, &a.UpdatedAt}, func() error {
			c := a
			c.State = quarantine.AlarmStatus(state)
			c.Since, c.UpdatedAt = c.Since.UTC(), c.UpdatedAt.UTC()
			c.ActiveAt, c.NotifiedAt, c.ResentAt = utcPtr(a.ActiveAt), utcPtr(a.NotifiedAt), utcPtr(a.ResentAt)
			out = append(out, c)
			return nil
		})
		return err
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
	return s.inTx(ctx, "save alarm states", func(tx pgx.Tx) error {
		for _, a := range states {
			_, err := tx.Exec(ctx, `INSERT INTO alarm_states (`+alarmStateColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
				ON CONFLICT (alarm, queue) DO UPDATE SET owner = excluded.owner, state = excluded.state,
					since = excluded.since, active_at = excluded.active_at, notified_at = excluded.notified_at,
					resent_at = excluded.resent_at, reason = excluded.reason, age_seconds = excluded.age_seconds,
					depth = excluded.depth, inflow_per_minute = excluded.inflow_per_minute, updated_at = excluded.updated_at`,
				a.Alarm, a.Queue, a.Owner, string(a.State), a.Since, a.ActiveAt, a.NotifiedAt,
				a.ResentAt, a.Reason, a.AgeSeconds, a.Depth, a.InflowPerMinute, now)
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
			_, err = tx.Exec(ctx, `INSERT INTO alarm_outbox (receiver, kind, event, created_at, delivery, attempts,
				next_attempt_at, last_error, delivered_at) VALUES ($1, $2, $3, $4, 'pending', 0, $5, '', NULL)`,
				n.Receiver, string(n.Kind), string(ev), now, next)
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
	err := s.inTx(ctx, "list pending alarm notifications", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+alarmNoteColumns+` FROM alarm_outbox
			WHERE delivery = 'pending' ORDER BY id LIMIT $1`, limit)
		if err != nil {
			return err
		}
		var n quarantine.AlarmNotification
		var kind, delivery string
		var ev []byte
		_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.Receiver, &kind, &ev, &n.CreatedAt, &delivery, &n.Attempts, &n.NextAttemptAt,
			&n.LastError, &n.DeliveredAt}, func() error {
			c := n
			c.Event = quarantine.AlarmEvent{}
			if err := json.Unmarshal(ev, &c.Event); err != nil {
				return err
			}
			c.Kind, c.Delivery = quarantine.AlarmKind(kind), quarantine.AlarmDelivery(delivery)
			c.CreatedAt, c.NextAttemptAt, c.DeliveredAt = c.CreatedAt.UTC(), c.NextAttemptAt.UTC(), utcPtr(n.DeliveredAt)
			out = append(out, c)
			return nil
		})
		return err
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
	delivery, next, delivered := quarantine.AlarmDeliveryPending, a.Next, (*time.Time)(nil)
	switch {
	case a.Delivered:
		delivery, next, delivered = quarantine.AlarmDeliveryDelivered, now, &now
	case a.GiveUp:
		delivery, next = quarantine.AlarmDeliveryFailed, now
	}
	errText := quarantine.SanitizeText(a.Err)
	if len(errText) > 1024 {
		errText = errText[:1024]
	}
	return s.inTx(ctx, "record an alarm delivery", func(tx pgx.Tx) error {
		var cur string
		if err := tx.QueryRow(ctx, `SELECT delivery FROM alarm_outbox WHERE id = $1 FOR UPDATE`, id).Scan(&cur); err != nil {
			return orNotFound(err, notfound.AlarmNotification(id))
		}
		if cur != string(quarantine.AlarmDeliveryPending) {
			return quarantine.Errorf(quarantine.ECONFLICT, "alarm notification %d is %s", id, cur)
		}
		_, err := tx.Exec(ctx, `UPDATE alarm_outbox SET delivery = $1, attempts = attempts + 1, next_attempt_at = $2,
			last_error = $3, delivered_at = $4 WHERE id = $5`, string(delivery), next, errText, delivered, id)
		return err
	})
}

// PurgeAlarmNotifications deletes the delivered and failed notifications
// queued before before; see store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeAlarmNotifications(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, "purge alarm notifications", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM alarm_outbox WHERE delivery <> 'pending' AND created_at < $1`, before)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// LockAlarms takes the schema's alarm advisory lock on a connection of
// its own (outside the pool, so that it takes no slot from the other
// work), held until Release, or until that connection dies, which
// PostgreSQL answers by releasing the lock. ECONFLICT while another
// session holds it; EUNAVAILABLE when the database cannot be reached.
func (s *Store) LockAlarms(ctx context.Context) (quarantine.AlarmLock, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, translate(err, "take the alarm lock")
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+alarmLockKey+`)`).Scan(&ok); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, translate(err, "take the alarm lock")
	}
	if !ok {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, quarantine.Errorf(quarantine.ECONFLICT, "another evaluator holds the alarms")
	}
	return &alarmLock{conn: conn}, nil
}

type alarmLock struct {
	mu   sync.Mutex
	conn *pgx.Conn // nil once released
}

// Check asks, on the lock's own session, whether it still holds the lock.
func (l *alarmLock) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "the alarm lock was released")
	}
	var held bool
	err := l.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND granted AND ((classid::bigint << 32) | objid::bigint) = `+alarmLockKey+`)`).Scan(&held)
	if err != nil || !held {
		l.close()
		if err == nil {
			err = errors.New("not held")
		}
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the alarm lock is lost", Err: err}
	}
	return nil
}

// close ends the lock's session (and any lock it still holds).
func (l *alarmLock) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
	l.conn = nil
}

// Release unlocks and closes the lock's connection; later calls do nothing.
func (l *alarmLock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock(`+alarmLockKey+`)`)
	l.close()
}
