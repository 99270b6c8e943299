package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/alarms"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

// Alarm states and their outbox (migration 0005). SQLite serves one
// process, so the evaluator's lock is a lock in the process, one per
// database file.

// AlarmStates returns every stored alarm state, by alarm and queue; see
// store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) AlarmStates(ctx context.Context) ([]quarantine.AlarmState, error) {
	return txn.Get(ctx, s.read, "list alarm states", func(tx *sql.Tx) ([]quarantine.AlarmState, error) {
		return queryAll(ctx, tx, scanAlarmState, `SELECT `+alarms.StateColumns+` FROM alarm_states ORDER BY alarm, queue`)
	})
}

func scanAlarmState(r scanner) (a quarantine.AlarmState, err error) {
	var state string
	var since, updated int64
	var active, notified, resent sql.NullInt64
	err = r.Scan(&a.Alarm, &a.Queue, &a.Owner, &state, &since, &active, &notified, &resent,
		&a.Reason, &a.AgeSeconds, &a.Depth, &a.InflowPerMinute, &updated)
	a.State = quarantine.AlarmStatus(state)
	a.Since, a.UpdatedAt = fromMicros(since), fromMicros(updated)
	a.ActiveAt, a.NotifiedAt, a.ResentAt = fromMicrosPtr(active), fromMicrosPtr(notified), fromMicrosPtr(resent)
	return a, err
}

// alarmTx is one write transaction of the store as the shared alarm
// methods (alarms.Methods) use it.
type alarmTx struct{ tx *sql.Tx }

// WriteAlarms runs fn in a write transaction (alarms.Backend).
func (p backend) WriteAlarms(ctx context.Context, what string, fn func(alarms.Tx) error) error {
	return p.s.write(ctx, what, func(tx *sql.Tx) error { return fn(alarmTx{tx}) })
}

func (t alarmTx) SaveState(ctx context.Context, a quarantine.AlarmState, now time.Time) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO alarm_states (`+alarms.StateColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		`+alarms.UpsertState,
		a.Alarm, a.Queue, a.Owner, string(a.State), micros(a.Since), microsPtr(a.ActiveAt), microsPtr(a.NotifiedAt),
		microsPtr(a.ResentAt), a.Reason, a.AgeSeconds, a.Depth, a.InflowPerMinute, micros(now))
	return err
}

func (t alarmTx) QueueNote(ctx context.Context, n quarantine.AlarmNotification, event []byte, next, now time.Time) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO alarm_outbox (receiver, kind, event, created_at, delivery, attempts,
		next_attempt_at, last_error, delivered_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, '', NULL)`,
		n.Receiver, string(n.Kind), string(event), micros(now), micros(next))
	return err
}

// PendingNotes reads pending notifications by id (alarms.Backend).
func (p backend) PendingNotes(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error) {
	return txn.Get(ctx, p.s.read, "list pending alarm notifications", func(tx *sql.Tx) ([]quarantine.AlarmNotification, error) {
		return queryAll(ctx, tx, scanAlarmNote, `SELECT `+alarms.NoteColumns+` FROM alarm_outbox
			WHERE delivery = 'pending' ORDER BY id LIMIT ?`, limit)
	})
}

func scanAlarmNote(r scanner) (n quarantine.AlarmNotification, err error) {
	var kind, ev, delivery string
	var created, next int64
	var delivered sql.NullInt64
	if err := r.Scan(&n.ID, &n.Receiver, &kind, &ev, &created, &delivery, &n.Attempts, &next, &n.LastError, &delivered); err != nil {
		return n, err
	}
	n.Kind, n.Delivery = quarantine.AlarmKind(kind), quarantine.AlarmDelivery(delivery)
	n.CreatedAt, n.NextAttemptAt, n.DeliveredAt = fromMicros(created), fromMicros(next), fromMicrosPtr(delivered)
	return n, json.Unmarshal([]byte(ev), &n.Event)
}

// Delivery reads the delivery of notification id.
func (t alarmTx) Delivery(ctx context.Context, id int64) (cur string, err error) {
	err = t.tx.QueryRowContext(ctx, `SELECT delivery FROM alarm_outbox WHERE id = ?`, id).Scan(&cur)
	return cur, orNotFound(err, notfound.AlarmNotification(id))
}

func (t alarmTx) SaveAttempt(ctx context.Context, id int64, o alarms.Outcome) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE alarm_outbox SET delivery = ?, attempts = attempts + 1, next_attempt_at = ?,
		last_error = ?, delivered_at = ? WHERE id = ?`, string(o.Delivery), micros(o.Next), o.LastError, microsPtr(o.DeliveredAt), id)
	return err
}

// PurgeAlarmNotifications deletes the delivered and failed notifications
// queued before before; see store.Alarms. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeAlarmNotifications(ctx context.Context, before time.Time) (int64, error) {
	return txn.Get(ctx, s.write, "purge alarm notifications", func(tx *sql.Tx) (int64, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM alarm_outbox WHERE delivery <> 'pending' AND created_at < ?`, micros(before))
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
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
