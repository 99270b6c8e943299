package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/alarms"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// Alarm states and their outbox (migration 0004). Several instances may
// share the database: LockAlarms makes one of them the evaluator with a
// session advisory lock whose key is derived from the schema, so that
// stores in other schemas of the same database do not contend.

// alarmLockKey is the advisory lock key of the current schema's alarms.
const alarmLockKey = `hashtextextended(current_schema() || '.quarantine.alarms', 0)`

// AlarmStates returns every stored alarm state, by alarm and queue; see
// store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) AlarmStates(ctx context.Context) ([]quarantine.AlarmState, error) {
	return txn.Get(ctx, s.inTx, "list alarm states", func(tx pgx.Tx) ([]quarantine.AlarmState, error) {
		rows, _ := tx.Query(ctx, `SELECT `+alarms.StateColumns+` FROM alarm_states ORDER BY alarm, queue`)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (a quarantine.AlarmState, err error) {
			var state string
			err = row.Scan(&a.Alarm, &a.Queue, &a.Owner, &state, &a.Since, &a.ActiveAt, &a.NotifiedAt, &a.ResentAt,
				&a.Reason, &a.AgeSeconds, &a.Depth, &a.InflowPerMinute, &a.UpdatedAt)
			a.State = quarantine.AlarmStatus(state)
			a.Since, a.UpdatedAt = a.Since.UTC(), a.UpdatedAt.UTC()
			a.ActiveAt, a.NotifiedAt, a.ResentAt = utcPtr(a.ActiveAt), utcPtr(a.NotifiedAt), utcPtr(a.ResentAt)
			return a, err
		})
	})
}

// alarmTx is one transaction of the store as the shared alarm methods
// (alarms.Methods) use it.
type alarmTx struct{ tx pgx.Tx }

// WriteAlarms runs fn in a transaction of the store (alarms.Backend).
func (p backend) WriteAlarms(ctx context.Context, what string, fn func(alarms.Tx) error) error {
	return p.s.inTx(ctx, what, func(tx pgx.Tx) error { return fn(alarmTx{tx}) })
}

func (t alarmTx) SaveState(ctx context.Context, a quarantine.AlarmState, now time.Time) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO alarm_states (`+alarms.StateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		`+alarms.UpsertState,
		a.Alarm, a.Queue, a.Owner, string(a.State), a.Since, a.ActiveAt, a.NotifiedAt,
		a.ResentAt, a.Reason, a.AgeSeconds, a.Depth, a.InflowPerMinute, now)
	return err
}

func (t alarmTx) QueueNote(ctx context.Context, n quarantine.AlarmNotification, event []byte, next, now time.Time) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO alarm_outbox (receiver, kind, event, created_at, delivery, attempts,
		next_attempt_at, last_error, delivered_at) VALUES ($1, $2, $3, $4, 'pending', 0, $5, '', NULL)`,
		n.Receiver, string(n.Kind), string(event), now, next)
	return err
}

// PendingNotes reads pending notifications by id (alarms.Backend).
func (p backend) PendingNotes(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error) {
	return txn.Get(ctx, p.s.inTx, "list pending alarm notifications", func(tx pgx.Tx) ([]quarantine.AlarmNotification, error) {
		rows, _ := tx.Query(ctx, `SELECT `+alarms.NoteColumns+` FROM alarm_outbox
			WHERE delivery = 'pending' ORDER BY id LIMIT $1`, limit)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (n quarantine.AlarmNotification, err error) {
			var kind, delivery string
			var ev []byte
			if err := row.Scan(&n.ID, &n.Receiver, &kind, &ev, &n.CreatedAt, &delivery, &n.Attempts, &n.NextAttemptAt,
				&n.LastError, &n.DeliveredAt); err != nil {
				return n, err
			}
			n.Kind, n.Delivery = quarantine.AlarmKind(kind), quarantine.AlarmDelivery(delivery)
			n.CreatedAt, n.NextAttemptAt, n.DeliveredAt = n.CreatedAt.UTC(), n.NextAttemptAt.UTC(), utcPtr(n.DeliveredAt)
			return n, json.Unmarshal(ev, &n.Event)
		})
	})
}

// Delivery reads the delivery of notification id, locking its row.
func (t alarmTx) Delivery(ctx context.Context, id int64) (cur string, err error) {
	err = t.tx.QueryRow(ctx, `SELECT delivery FROM alarm_outbox WHERE id = $1 FOR UPDATE`, id).Scan(&cur)
	return cur, orNotFound(err, notfound.AlarmNotification(id))
}

func (t alarmTx) SaveAttempt(ctx context.Context, id int64, o alarms.Outcome) error {
	_, err := t.tx.Exec(ctx, `UPDATE alarm_outbox SET delivery = $1, attempts = attempts + 1, next_attempt_at = $2,
		last_error = $3, delivered_at = $4 WHERE id = $5`, string(o.Delivery), o.Next, o.LastError, o.DeliveredAt, id)
	return err
}

// PurgeAlarmNotifications deletes the delivered and failed notifications
// queued before before; see store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeAlarmNotifications(ctx context.Context, before time.Time) (int64, error) {
	return txn.Get(ctx, s.inTx, "purge alarm notifications", func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM alarm_outbox WHERE delivery <> 'pending' AND created_at < $1`, before)
		return tag.RowsAffected(), err
	})
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
