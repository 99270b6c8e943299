package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// hourMicros and minuteMicros are an hour and a minute in microseconds.
const (
	hourMicros   = int64(time.Hour / time.Microsecond)
	minuteMicros = int64(time.Minute / time.Microsecond)
)

// inflowHour is the key of the inflow_hours row counting a message
// collected at t (µs): the hour h with h < t <= h + 1 hour.
func inflowHour(t int64) int64 { return (t - 1) / hourMicros * hourMicros }

// inflowMinute is the key of the inflow_minutes row counting a message
// collected at t (µs): the minute m with m < t <= m + 1 minute.
func inflowMinute(t int64) int64 { return (t - 1) / minuteMicros * minuteMicros }

// inflowKey is a row of inflow_hours (hour: the hour) or inflow_minutes
// (hour: the minute).
type inflowKey struct {
	queue, owner string
	hour         int64
}

// foldInflow adds the new messages msgs[idx] to inflow_hours and
// inflow_minutes, one upsert per queue, owner and hour (minute), and the
// quarantined ones to waiting_minutes (by the minute of failed_at), inside
// tx.
func foldInflow(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, idx []int) error {
	type key = inflowKey
	counts, minutes, waiting := map[key]int64{}, map[key]int64{}, map[key]int64{}
	for _, i := range idx {
		m := msgs[i]
		at := micros(m.CollectedAt)
		counts[key{m.Queue, m.Owner, inflowHour(at)}]++
		minutes[key{m.Queue, m.Owner, inflowMinute(at)}]++
		if m.Status == quarantine.StatusQuarantined {
			waiting[key{m.Queue, m.Owner, inflowMinute(micros(m.FailedAt))}]++
		}
	}
	if len(counts) == 0 {
		return nil
	}
	if err := upsertInflow(ctx, tx, "inflow_hours", "hour", counts); err != nil {
		return err
	}
	if err := upsertInflow(ctx, tx, "inflow_minutes", "minute", minutes); err != nil {
		return err
	}
	return upsertInflow(ctx, tx, "waiting_minutes", "minute", waiting)
}

// upsertInflow adds counts to table (inflow_hours, inflow_minutes or
// waiting_minutes, whose time column is col), in key order.
func upsertInflow(ctx context.Context, tx *sql.Tx, table, col string, counts map[inflowKey]int64) error {
	keys := make([]inflowKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b inflowKey) int {
		if c := strings.Compare(a.queue, b.queue); c != 0 {
			return c
		}
		if c := cmp.Compare(a.hour, b.hour); c != 0 {
			return c
		}
		return strings.Compare(a.owner, b.owner)
	})
	// table and col are the two constants above.
	up, err := tx.PrepareContext(ctx, `INSERT INTO `+table+` (queue, owner, `+col+`, n) VALUES (?, ?, ?, ?)
		ON CONFLICT (queue, `+col+`, owner) DO UPDATE SET n = n + excluded.n`)
	if err != nil {
		return err
	}
	defer up.Close()
	for _, k := range keys {
		if _, err := up.ExecContext(ctx, k.queue, k.owner, k.hour, counts[k]); err != nil {
			return err
		}
	}
	return nil
}
