package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/replays"
)

// The re-failure link: a new message whose idempotency key equals that of
// a replayed message (or one being replayed: held by a replay item in
// flight, replays.InFlight, or replaying, moved by an older version)
// re-failed from it. InsertBatch locks the replayed
// candidates before it inserts (message rows first, then the counters the
// triggers keep: the order every writer takes), then links as if the
// batch were stored one message at a time, in order: the first new
// message of a key re-failed from the most recently failed replayed
// message of that key, the second from the next one, and so on. Each
// linked message becomes refailed and the new one records it in
// refail_of, in the transaction of the insert.

// lockReplayedSQL locks the replayed messages with one of the keys, in id
// order so that concurrent writers cannot deadlock: one probe of the key
// index per key, and of the items' message index for a quarantined
// message (held in flight or not; the columns of replays.InFlight name
// the subquery's table).
const lockReplayedSQL = `SELECT m.id, m.idempotency_key, m.failed_at FROM messages m
WHERE m.idempotency_key = ANY($1::text[]) AND (m.status IN ('replayed', 'replaying') OR m.status = 'quarantined'
	AND EXISTS (SELECT 1 FROM replay_items WHERE replay_items.message_id = m.id AND ` + replays.InFlight + `))
ORDER BY m.id FOR UPDATE OF m`

type replayedMsg struct {
	id       string
	failedAt time.Time
}

// queueLockReplayed queues the lock of the replayed messages sharing a
// non-empty idempotency key with msgs[idx] on b, and reports whether it
// did (no key, no query).
func queueLockReplayed(b *pgx.Batch, msgs []*quarantine.Message, idx []int) bool {
	seen := make(map[string]bool)
	var keys []string
	for _, i := range idx {
		if k := msgs[i].IdempotencyKey; k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false
	}
	b.Queue(lockReplayedSQL, keys)
	return true
}

// readLockReplayed reads the locked replayed messages, per key, most
// recently failed first (by failed_at, then id).
func readLockReplayed(br pgx.BatchResults, queued bool) (map[string][]replayedMsg, error) {
	if !queued {
		return nil, nil
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := map[string][]replayedMsg{}
	var id, key string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &key, &at}, func() error {
		out[key] = append(out[key], replayedMsg{id: id, failedAt: at})
		return nil
	})
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b replayedMsg) int {
			if c := b.failedAt.Compare(a.failedAt); c != 0 {
				return c
			}
			return strings.Compare(b.id, a.id)
		})
	}
	return out, err
}

// refailLink says that msgs[msg] (stored as new) re-failed from old.
type refailLink struct {
	msg int
	new string
	old string
}

// linkRefailures pairs the new messages of the batch (in batch order)
// with the replayed messages of their keys, most recently failed first.
func linkRefailures(msgs []*quarantine.Message, byOrder []int, isNew map[string]bool, replayed map[string][]replayedMsg) []refailLink {
	if len(replayed) == 0 {
		return nil
	}
	var links []refailLink
	used := map[string]int{}
	for _, i := range byOrder {
		m := msgs[i]
		rs := replayed[m.IdempotencyKey]
		if m.IdempotencyKey == "" || !isNew[m.ID] || used[m.IdempotencyKey] >= len(rs) {
			continue
		}
		links = append(links, refailLink{msg: i, new: m.ID, old: rs[used[m.IdempotencyKey]].id})
		used[m.IdempotencyKey]++
	}
	return links
}

// applyRefailures marks the old messages refailed, records the links, and
// marks refailed the replay item that published each old message last.
func (s *Store) applyRefailures(ctx context.Context, tx pgx.Tx, links []refailLink, now time.Time) error {
	if len(links) == 0 {
		return nil
	}
	news, olds := make([]string, len(links)), make([]string, len(links))
	for i, l := range links {
		news[i], olds[i] = l.new, l.old
	}
	if _, err := tx.Exec(ctx, `UPDATE messages SET status = 'refailed', updated_at = $2
		WHERE id = ANY($1::text[]) AND status IN ('replayed', 'replaying', 'quarantined')`, olds, now); err != nil {
		return err
	}
	// The new entry carries the replays of its job so far, for the
	// replay cap.
	if _, err := tx.Exec(ctx, `UPDATE messages m SET refail_of = l.old, replay_count = o.replay_count
		FROM unnest($1::text[], $2::text[]) AS l(new, old) JOIN messages o ON o.id = l.old
		WHERE m.id = l.new`, news, olds); err != nil {
		return err
	}
	// The replay that published each old message: its latest published
	// item re-failed.
	_, err := tx.Exec(ctx, `UPDATE replay_items i SET outcome = 'refailed', refail_id = l.new, updated_at = $3
		FROM unnest($1::text[], $2::text[]) AS l(new, old),
		LATERAL (SELECT j.batch_id, j.seq FROM replay_items j
			WHERE j.message_id = l.old AND j.outcome IN ('published', 'deduplicated')
			ORDER BY j.published_at DESC NULLS LAST, j.batch_id DESC LIMIT 1) p
		WHERE i.batch_id = p.batch_id AND i.seq = p.seq`, news, olds, now)
	if err != nil {
		return err
	}
	// A message still in flight came back before its publish was
	// recorded: its pending item notes the new entry, and becomes
	// refailed when the publish is recorded.
	_, err = tx.Exec(ctx, `UPDATE replay_items i SET refail_id = l.new, updated_at = $3
		FROM unnest($1::text[], $2::text[]) AS l(new, old)
		WHERE i.message_id = l.old AND i.outcome = 'pending'`, news, olds, now)
	return err
}
