package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// runningSQL says whether batch ? is running (false when there is none).
const runningSQL = `SELECT EXISTS (SELECT 1 FROM replay_batches WHERE id = ? AND state = 'running')`

// leasedColumns are replays.ItemColumns without their alias, for the lease's
// RETURNING (which cannot name the table by an alias).
var leasedColumns = strings.ReplaceAll(replays.ItemColumns, "i.", "")

// Lease leases the items of l in a write transaction (replays.Leaser):
// it holds the database's write lock, so concurrent leasers never get the
// same item; a batch that the skipped items left without pending ones is
// completed in it (claimMessages).
func (p backend) Lease(ctx context.Context, l replays.LeaseRequest) ([]quarantine.ReplayLease, time.Time, time.Duration, error) {
	out := []quarantine.ReplayLease{}
	var due time.Time
	var wait time.Duration
	err := p.s.write(ctx, "lease replay items", func(tx *sql.Tx) error {
		out, due, wait = out[:0], time.Time{}, 0
		var running bool
		if err := tx.QueryRowContext(ctx, runningSQL, l.BatchID).Scan(&running); err != nil || !running {
			return err
		}
		now := p.s.clock()
		due = now
		q := `SELECT seq FROM replay_items WHERE batch_id = ? AND outcome = 'pending'
			AND (lease_owner = '' OR lease_expires_at < ?)`
		args := []any{l.BatchID, micros(now)}
		if l.MaxSeq > 0 {
			q += ` AND seq < ?`
			args = append(args, l.MaxSeq)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY seq LIMIT ?`, append(args, l.N)...)
		if err != nil {
			return err
		}
		var seqs []int
		for rows.Next() {
			var seq int
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(seqs) == 0 {
			return err
		}
		if len(l.Buckets) > 0 {
			var granted int
			if granted, due, wait, err = takeTokens(ctx, tx, l.Buckets, now, replays.ReserveSlots(len(seqs), l.Lead, l.Ahead)); err != nil || granted == 0 {
				return err
			}
			seqs = seqs[:granted]
		}
		sj, _ := json.Marshal(seqs)
		rows, err = tx.QueryContext(ctx, `UPDATE replay_items SET lease_owner = ?, lease_expires_at = ?,
			fence = fence + 1, attempts = attempts + 1, updated_at = ?
			WHERE batch_id = ? AND seq IN (SELECT value FROM json_each(?))
			RETURNING `+leasedColumns+`, fence`,
			l.Owner, micros(now.Add(l.TTL)), micros(now), l.BatchID, string(sj))
		if err != nil {
			return err
		}
		for rows.Next() {
			var l quarantine.ReplayLease
			if l.Item, err = scanItem(rows, &l.Fence); err != nil {
				rows.Close()
				return err
			}
			out = append(out, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if out, err = p.s.claimMessages(ctx, tx, l.BatchID, out, now); err != nil {
			return err
		}
		slices.SortFunc(out, func(a, b quarantine.ReplayLease) int { return a.Item.Seq - b.Item.Seq })
		return nil
	})
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	return out, due, wait, nil
}

// LeasedMessages reads the messages of leases on a reader: the writer is
// free meanwhile (replays.Leaser).
func (p backend) LeasedMessages(ctx context.Context, leases []quarantine.ReplayLease) error {
	return p.s.leasedMessages(ctx, leases)
}

func (p backend) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	return p.s.ReleaseReplayItems(ctx, leases)
}

// claimMessages skips the items whose message another batch holds or
// published, or that was discarded (replays.Claim), completing the batch
// when that left nothing pending; the messages' rows are not changed
// (the write transaction holds the database's one write lock). It
// returns the leases kept.
func (s *Store) claimMessages(ctx context.Context, tx *sql.Tx, batchID string, out []quarantine.ReplayLease, now time.Time) ([]quarantine.ReplayLease, error) {
	ids := make([]string, len(out))
	for i, l := range out {
		ids[i] = l.Item.MessageID
	}
	status := make(map[string]quarantine.Status, len(out))
	if err := scanPairs(tx.QueryContext(ctx, `SELECT id, status FROM messages WHERE id IN (SELECT value FROM json_each(?))`,
		jsonArray(ids)))(func(id, st string) { status[id] = quarantine.Status(st) }); err != nil {
		return nil, err
	}
	holders, err := readHolders(ctx, tx, ids, batchID)
	if err != nil {
		return nil, err
	}
	skip, keep := replays.Claim(out, status, holders)
	if len(skip) == 0 {
		return keep, nil
	}
	for _, k := range skip {
		if _, err := tx.ExecContext(ctx, `UPDATE replay_items SET outcome = 'skipped', reason = ?, updated_at = ?,
			lease_owner = '', lease_expires_at = NULL WHERE batch_id = ? AND seq = ?`,
			k.Reason, micros(now), batchID, k.Seq); err != nil {
			return nil, err
		}
	}
	ev, err := completeIfDone(ctx, tx, batchID, now)
	if err != nil || ev == nil {
		return keep, err
	}
	return keep, s.appendAudits(ctx, tx, []*quarantine.AuditEvent{ev})
}

// readHolders reads the batches other than batchID whose items hold or
// published the messages of ids (replays.Holders).
func readHolders(ctx context.Context, tx *sql.Tx, ids []string, batchID string) (replays.Holders, error) {
	holders := replays.NewHolders()
	rows, err := tx.QueryContext(ctx, `SELECT message_id, batch_id, outcome = 'pending' FROM replay_items
		WHERE message_id IN (SELECT value FROM json_each(?)) AND batch_id <> ? AND attempts > 0
			AND outcome IN (`+replays.HolderOutcomes+`)
		ORDER BY updated_at`, jsonArray(ids), batchID)
	if err != nil {
		return holders, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, by string
		var pending bool
		if err := rows.Scan(&id, &by, &pending); err != nil {
			return holders, err
		}
		holders.Add(id, by, pending)
	}
	return holders, rows.Err()
}

// scanPairs returns a function that calls fn with each row of two text
// columns of rows (the latest row wins where fn keeps by the first).
func scanPairs(rows *sql.Rows, err error) func(fn func(a, b string)) error {
	return func(fn func(a, b string)) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a, b string
			if err := rows.Scan(&a, &b); err != nil {
				return err
			}
			fn(a, b)
		}
		return rows.Err()
	}
}

// leasedMessages sets the message of each lease, read in one snapshot.
// EINTERNAL when one is missing (an item always names a stored message).
func (s *Store) leasedMessages(ctx context.Context, out []quarantine.ReplayLease) error {
	return s.read(ctx, "read leased messages", func(tx *sql.Tx) error {
		msgs, err := getMessages(ctx, tx, out)
		if err != nil {
			return err
		}
		for i := range out {
			if out[i].Message = msgs[out[i].Item.MessageID]; out[i].Message == nil {
				return quarantine.Errorf(quarantine.EINTERNAL, "replay item %d names a message that does not exist", out[i].Item.Seq)
			}
		}
		return nil
	})
}

// ReleaseReplayItems gives leased items back when their fence still
// matches; see store.Replays. Errors: EUNAVAILABLE.
func (s *Store) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	if len(leases) == 0 {
		return nil
	}
	return s.write(ctx, "release replay items", func(tx *sql.Tx) error {
		now := micros(s.clock())
		for _, l := range leases {
			refusal := quarantine.ClipReason(l.Refusal)
			if _, err := tx.ExecContext(ctx, `UPDATE replay_items SET lease_owner = '', lease_expires_at = NULL,
				updated_at = ?, refusals = refusals + (? <> ''), reason = CASE WHEN ? <> '' THEN ? ELSE reason END
				WHERE batch_id = ? AND seq = ? AND fence = ? AND outcome = 'pending'`,
				now, refusal, refusal, refusal, l.Item.BatchID, l.Item.Seq, l.Fence); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordReplayResults records the outcomes of leased items in one
// transaction; see store.Replays. Errors: EINVALID for a result that is
// not an outcome of a publish, EUNAVAILABLE.
func (s *Store) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	for _, r := range results {
		if err := replays.ValidateResult(r); err != nil {
			return nil, err
		}
	}
	var stale []int
	err := s.write(ctx, "record replay results", func(tx *sql.Tx) error {
		stale = nil
		if len(results) == 0 {
			return nil
		}
		now := s.clock()
		rs := make([]resultRow, len(results))
		for i, r := range results {
			rs[i] = newResultRow(r, now)
		}
		recorded, err := recordItems(ctx, tx, rs, now)
		if err != nil {
			return err
		}
		var valid []resultRow
		var batches []string
		for i := range rs {
			if !recorded[recordKey{rs[i].Batch, rs[i].Message, rs[i].Fence}] {
				stale = append(stale, i)
				continue
			}
			valid = append(valid, rs[i])
			if !slices.Contains(batches, rs[i].Batch) {
				batches = append(batches, rs[i].Batch)
			}
		}
		if err := moveRecorded(ctx, tx, valid, now); err != nil {
			return err
		}
		var events []*quarantine.AuditEvent
		for _, id := range batches {
			ev, err := completeIfDone(ctx, tx, id, now)
			if err != nil {
				return err
			}
			if ev != nil {
				events = append(events, ev)
			}
		}
		return s.appendAudits(ctx, tx, events)
	})
	if err != nil {
		return nil, err
	}
	return stale, nil
}

// resultRow is one result as the set-based statements read it (JSON).
type resultRow struct {
	Batch     string   `json:"b"`
	Message   string   `json:"m"`
	Fence     int64    `json:"f"`
	Outcome   string   `json:"o"`
	Published bool     `json:"p"`
	Reason    string   `json:"r"`
	Dest      string   `json:"d"`
	Version   int      `json:"v"`
	SHA       string   `json:"h"`
	Dropped   []string `json:"x"`
	At        *int64   `json:"a"` // published_at, micros; null unless published
}

func newResultRow(r quarantine.ReplayResult, now time.Time) resultRow {
	at := now
	if !r.At.IsZero() {
		at = r.At.UTC().Truncate(time.Microsecond)
	}
	row := resultRow{Batch: r.BatchID, Message: r.MessageID, Fence: r.Fence, Outcome: string(r.Outcome),
		Published: replays.Published(r.Outcome), Reason: quarantine.SanitizeText(r.Reason),
		Dest: quarantine.SanitizeText(r.Destination), Version: r.PayloadVersion,
		SHA: quarantine.SanitizeText(r.PayloadSHA256), Dropped: make([]string, len(r.DroppedHeaders))}
	for i, h := range r.DroppedHeaders {
		row.Dropped[i] = quarantine.SanitizeText(h)
	}
	if row.Published {
		a := micros(at)
		row.At = &a
	}
	return row
}

// recordKey names the lease a result is for.
type recordKey struct {
	batch, message string
	fence          int64
}

// recordItems writes the results to their items, in one statement (the
// rows parsed once, as JSONB, not once per field), and
// returns the (batch, message, fence) of each item it wrote: those whose fence
// is current and which are pending, or which were cancelled while their
// lease was live and whose result is a publish. An item that noted an
// early re-failure becomes refailed when published.
func recordItems(ctx context.Context, tx *sql.Tx, rs []resultRow, now time.Time) (map[recordKey]bool, error) {
	b, err := json.Marshal(rs)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE replay_items SET
		outcome = CASE WHEN replay_items.refail_id <> '' AND r.p THEN 'refailed' ELSE r.o END,
		reason = r.r, destination = r.d, payload_version = r.v, payload_sha256 = r.h,
		dropped_headers = r.x, published_at = r.a, updated_at = ?1, lease_owner = '', lease_expires_at = NULL
		FROM (SELECT j.value->>'b' AS b, j.value->>'m' AS m, j.value->>'f' AS f, j.value->>'o' AS o,
			j.value->>'p' AS p, j.value->>'r' AS r, j.value->>'d' AS d, j.value->>'v' AS v, j.value->>'h' AS h,
			json(j.value->'x') AS x, j.value->>'a' AS a FROM jsonb_each(jsonb(?2)) j) AS r
		WHERE replay_items.message_id = r.m AND replay_items.batch_id = r.b AND replay_items.fence = r.f
			AND (replay_items.outcome = 'pending' OR r.p AND replay_items.outcome = 'skipped'
				AND replay_items.reason = 'cancelled' AND replay_items.lease_owner <> '')
		RETURNING batch_id, message_id, fence`, micros(now), string(b))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[recordKey]bool, len(rs))
	for rows.Next() {
		var k recordKey
		if err := rows.Scan(&k.batch, &k.message, &k.fence); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}

// lateRecordSQL moves the published messages that re-failed before their
// record (they stay refailed). The unary + keeps the planner from
// scanning the status index through every quarantined message.
const lateRecordSQL = `UPDATE messages SET status = CASE status WHEN 'refailed' THEN 'refailed' ELSE 'replayed' END,
	replay_count = replay_count + 1, updated_at = ?
	WHERE id IN (SELECT value FROM json_each(?)) AND +status IN ('refailed', 'quarantined')`

// moveRecorded moves the messages of recorded results, once: replayed
// when published (from quarantined, where the lease left them; from
// replaying, where an older version's lease moved them; refailed stays
// when it came back before this record), quarantined again otherwise
// (from replaying only: an item in flight left its message quarantined).
func moveRecorded(ctx context.Context, tx *sql.Tx, rs []resultRow, now time.Time) error {
	var published, other []string
	for _, r := range rs {
		if r.Published {
			published = append(published, r.Message)
		} else {
			other = append(other, r.Message)
		}
	}
	if len(published) > 0 {
		ids := jsonArray(published)
		moved := 0
		for _, from := range []string{"quarantined", "replaying"} {
			n, err := moveStatusN(ctx, tx, ids, from, "replayed", ", replay_count = replay_count + 1", micros(now))
			if err != nil {
				return err
			}
			if moved += n; moved == len(published) {
				break
			}
		}
		// Usually every one was quarantined; look for the others only
		// when some were not.
		if moved < len(published) {
			if _, err := tx.ExecContext(ctx, lateRecordSQL, micros(now), ids); err != nil {
				return err
			}
		}
	}
	if len(other) > 0 {
		return moveStatus(ctx, tx, jsonArray(other), "replaying", "quarantined", "", micros(now))
	}
	return nil
}
