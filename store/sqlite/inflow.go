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

// hourMicros is an hour in microseconds.
const hourMicros = int64(time.Hour / time.Microsecond)

// inflowHour is the key of the inflow_hours row counting a message
// collected at t (µs): the hour h with h < t <= h + 1 hour.
func inflowHour(t int64) int64 { return (t - 1) / hourMicros * hourMicros }

// foldInflow adds the new messages msgs[idx] to inflow_hours, one upsert
// per queue, owner and hour, inside tx.
func foldInflow(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, idx []int) error {
	type key struct {
		queue, owner string
		hour         int64
	}
	counts := map[key]int64{}
	for _, i := range idx {
		m := msgs[i]
		counts[key{m.Queue, m.Owner, inflowHour(micros(m.CollectedAt))}]++
	}
	if len(counts) == 0 {
		return nil
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.queue, b.queue); c != 0 {
			return c
		}
		if c := cmp.Compare(a.hour, b.hour); c != 0 {
			return c
		}
		return strings.Compare(a.owner, b.owner)
	})
	up, err := tx.PrepareContext(ctx, `INSERT INTO inflow_hours (queue, owner, hour, n) VALUES (?, ?, ?, ?)
		ON CONFLICT (queue, hour, owner) DO UPDATE SET n = n + excluded.n`)
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
