package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// messageColumns are the columns of messages read into a Message, in the
// order scanMessage expects, qualified by the alias m.
const messageColumns = `m.id, m.source, m.source_kind, m.queue, m.job_name, m.message_id,
	m.idempotency_key, m.schema_version, m.attempts, m.failure_class, m.reason,
	m.payload_size, m.content_type, m.payload_sha256, m.payload_version, m.headers,
	m.enqueued_at, m.first_failed_at, m.failed_at, m.collected_at, m.updated_at,
	m.status, m.owner, m.fingerprint, m.replay_count, m.refail_of, m.flags, m.dedupe_key, m.key_rule`

// insertMessages stores a batch in one statement: the messages (in array
// order, which is the order of the sorted keys, so that concurrent batches
// take their unique index locks in one order and cannot deadlock;
// conflicting keys are skipped), version 1 of each stored message's
// payload, and the counts of failure_groups, inflow_hours,
// inflow_minutes and waiting_minutes (each in key order, the order every writer locks them
// in, and always in that order: the statement's CTEs run in their order). RETURNING names the
// rows that were stored.
// The counts are folded from the narrow RETURNING rows, not by a trigger:
// no transition table of whole rows on the hot path.
const insertMessages = `WITH ins AS (
	INSERT INTO messages (id, source, source_kind, queue, job_name, message_id,
		idempotency_key, schema_version, attempts, failure_class, reason,
		payload_size, content_type, payload_sha256, payload_version, headers,
		enqueued_at, first_failed_at, failed_at, collected_at, updated_at,
		status, owner, fingerprint, replay_count, refail_of, flags, dedupe_key, key_rule)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
		$7::text[], $8::text[], $9::int[], $10::text[], $11::text[],
		$12::bigint[], $13::text[], $14::text[], $15::int[], $16::text[],
		$17::timestamptz[], $18::timestamptz[], $19::timestamptz[], $20::timestamptz[], $21::timestamptz[],
		$22::text[], $23::text[], $24::text[], $25::int[], $26::text[], $27::text[], $28::text[], $31::text[])
	ON CONFLICT (source, dedupe_key) DO NOTHING
	RETURNING id, queue, owner, status, fingerprint, job_name, failure_class, reason, failed_at, collected_at
), ver AS (
	INSERT INTO payload_versions (message_id, version, sha256, prev_sha256,
		size, content_type, actor, reason, created_at, payload, payload_text)
	SELECT v.id, 1, v.sha, '', v.size, v.ct, 'collector:' || v.source, '', v.collected, v.bin, v.txt
	FROM unnest($1::text[], $14::text[], $12::bigint[], $13::text[], $2::text[], $20::timestamptz[], $29::bytea[], $30::text[])
		AS v(id, sha, size, ct, source, collected, bin, txt)
	WHERE v.id IN (SELECT id FROM ins)
), fg AS (
	INSERT INTO failure_groups AS g (fingerprint, queue, owner, status, job_name, failure_class, reason,
		n, first_failed_at, last_failed_at, example_id)
	SELECT fingerprint, queue, owner, status, min(job_name), min(failure_class), min(reason), count(*),
		min(failed_at), max(failed_at),
		substr(max(to_char(failed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || id COLLATE "C"), 21)
	FROM ins GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
	ON CONFLICT (fingerprint, queue, owner, status) DO UPDATE SET
		n = g.n + EXCLUDED.n,
		first_failed_at = CASE WHEN g.n <= 0 THEN EXCLUDED.first_failed_at
			ELSE least(g.first_failed_at, EXCLUDED.first_failed_at) END,
		last_failed_at = CASE WHEN g.n <= 0 THEN EXCLUDED.last_failed_at
			ELSE greatest(g.last_failed_at, EXCLUDED.last_failed_at) END,
		example_id = CASE
			WHEN g.n <= 0 OR (EXCLUDED.last_failed_at, EXCLUDED.example_id) > (g.last_failed_at, g.example_id)
			THEN EXCLUDED.example_id ELSE g.example_id END
), ih AS (
	INSERT INTO inflow_hours AS h (queue, owner, hour, n)
	SELECT queue, owner, date_trunc('hour', collected_at - interval '1 microsecond', 'UTC'), count(*)
	FROM ins GROUP BY 1, 3, 2 ORDER BY 1, 3, 2
	ON CONFLICT (queue, hour, owner) DO UPDATE SET n = h.n + EXCLUDED.n
), im AS (
	INSERT INTO inflow_minutes AS mi (queue, owner, minute, n)
	SELECT queue, owner, date_trunc('minute', collected_at - interval '1 microsecond', 'UTC'), count(*)
	FROM ins GROUP BY 1, 3, 2 ORDER BY 1, 3, 2
	ON CONFLICT (queue, minute, owner) DO UPDATE SET n = mi.n + EXCLUDED.n
), wm AS (
	INSERT INTO waiting_minutes AS wm (queue, owner, minute, n)
	SELECT queue, owner, date_trunc('minute', failed_at - interval '1 microsecond', 'UTC'), count(*)
	FROM ins WHERE status = 'quarantined' GROUP BY 1, 3, 2 ORDER BY 1, 3, 2
	ON CONFLICT (queue, minute, owner) DO UPDATE SET n = wm.n + EXCLUDED.n
)
SELECT id FROM ins`

// selectExisting finds the stored IDs of keys that were already taken.
const selectExisting = `SELECT m.source, m.dedupe_key, m.id
FROM unnest($1::text[], $2::text[]) AS k(source, dedupe_key)
JOIN messages m ON m.source = k.source AND m.dedupe_key = k.dedupe_key`

type dedupeKey struct{ source, key string }

// InsertBatch stores msgs in one transaction; see store.Store. Messages
// are normalised in place. The re-failure link (refail.go) is made in the
// same transaction. Errors: EINVALID for a value PostgreSQL cannot store
// or index, EUNAVAILABLE, EINTERNAL.
func (s *Store) InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error) {
	if len(msgs) == 0 {
		return []quarantine.InsertResult{}, nil
	}
	// The search indexer leaves the CPU to ingest (search.Pacer).
	defer s.inserting()()
	now := s.clock()
	first := make(map[dedupeKey]int, len(msgs)) // key -> index of its first message
	var unique []int
	for i, m := range msgs {
		if m == nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "message %d of the batch is missing", i)
		}
		m.Normalize(now)
		if m.DedupeKey == "" {
			m.DedupeKey = m.PayloadSHA256
		}
		k := dedupeKey{m.Source, m.DedupeKey}
		if _, ok := first[k]; !ok {
			first[k] = i
			unique = append(unique, i)
		}
	}
	byOrder := slices.Clone(unique) // batch order, for the re-failure link
	sort.Slice(unique, func(a, b int) bool {
		x, y := msgs[unique[a]], msgs[unique[b]]
		if x.Source != y.Source {
			return x.Source < y.Source
		}
		return x.DedupeKey < y.DedupeKey
	})

	stored := make(map[dedupeKey]string, len(unique)) // key -> stored ID
	isNew := make(map[string]bool, len(unique))
	var links []refailLink
	err := s.inTx(ctx, "insert messages", func(tx pgx.Tx) error {
		clear(stored)
		clear(isNew)
		// One round trip: lock the replayed candidates, then insert.
		batch := &pgx.Batch{}
		locking := queueLockReplayed(batch, msgs, byOrder)
		presize(tx.Conn().TypeMap())
		args, room := messageArrays(msgs, unique)
		args[0] = presized{v: args[0].([]string), room: room}
		batch.Queue(insertMessages, args...)
		br := tx.SendBatch(ctx, batch)
		replayed, err := readLockReplayed(br, locking)
		if err != nil {
			_ = br.Close()
			return err
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			_ = br.Close()
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		for _, id := range ids {
			isNew[id] = true
		}
		var taken []int
		for _, i := range unique {
			if isNew[msgs[i].ID] {
				stored[dedupeKey{msgs[i].Source, msgs[i].DedupeKey}] = msgs[i].ID
			} else {
				taken = append(taken, i)
			}
		}
		links = linkRefailures(msgs, byOrder, isNew, replayed)
		if err := s.applyRefailures(ctx, tx, links, now); err != nil {
			return err
		}
		if len(taken) > 0 {
			return lookupExisting(ctx, tx, msgs, taken, stored)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		msgs[l.msg].RefailOf = l.old
	}
	res := make([]quarantine.InsertResult, len(msgs))
	for i, m := range msgs {
		k := dedupeKey{m.Source, m.DedupeKey}
		res[i] = quarantine.InsertResult{ID: stored[k], New: first[k] == i && isNew[m.ID]}
	}
	return res, nil
}

// lookupExisting fills stored with the IDs of the messages that already
// held the keys of msgs[taken].
func lookupExisting(ctx context.Context, tx pgx.Tx, msgs []*quarantine.Message, taken []int, stored map[dedupeKey]string) error {
	sources := make([]string, len(taken))
	keys := make([]string, len(taken))
	for j, i := range taken {
		sources[j], keys[j] = msgs[i].Source, msgs[i].DedupeKey
	}
	rows, err := tx.Query(ctx, selectExisting, sources, keys)
	if err != nil {
		return err
	}
	var k dedupeKey
	var id string
	_, err = pgx.ForEachRow(rows, []any{&k.source, &k.key, &id}, func() error {
		stored[k] = id
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range taken {
		if _, ok := stored[dedupeKey{msgs[i].Source, msgs[i].DedupeKey}]; !ok {
			// The conflicting row is gone: it was removed after the insert saw it.
			return quarantine.Errorf(quarantine.EUNAVAILABLE, "a concurrent change removed a message being deduplicated; try again")
		}
	}
	return nil
}

// messageArrays returns the 31 column arrays of insertMessages (28
// columns of messages, the payload as bytes or text, then key_rule) for msgs[idx],
// in idx order, and about how many bytes they take encoded.
// Nullable columns are pgtype values rather than pointers, which pgx
// encodes without reflection.
func messageArrays(msgs []*quarantine.Message, idx []int) ([]any, int) {
	n := len(idx)
	var (
		id, source, kind, queue, job, msgID, idem, schema = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		class, reason, ctype, sha, headers                = mk(n), mk(n), mk(n), mk(n), mk(n)
		status, owner, fp, refail, flags, dkey, krule     = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		attempts, version, replays                        = make([]int32, n), make([]int32, n), make([]int32, n)
		size                                              = make([]int64, n)
		enq, ffirst                                       = make(pgtype.FlatArray[pgtype.Timestamptz], n), make(pgtype.FlatArray[pgtype.Timestamptz], n)
		failed, collected, updated                        = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		bin                                               = make(pgtype.FlatArray[[]byte], n)
		txt                                               = make(pgtype.FlatArray[pgtype.Text], n)
	)
	// Each element's length word and value: 4 bytes each for the 3 int4
	// and 12 for the 5 timestamptz and the int8 columns, the text as it is.
	room := 31*24 + n*(31*4+3*4+6*8)
	for j, i := range idx {
		m := msgs[i]
		id[j], source[j], kind[j], queue[j], job[j] = m.ID, m.Source, string(m.SourceKind), m.Queue, m.JobName
		msgID[j], idem[j], schema[j] = m.MessageID, m.IdempotencyKey, m.SchemaVersion
		attempts[j], class[j], reason[j] = int32(m.Attempts), string(m.FailureClass), m.Reason
		size[j], ctype[j], sha[j], version[j] = int64(m.PayloadSize), m.ContentType, m.PayloadSHA256, int32(m.PayloadVersion)
		headers[j] = encodeHeaders(m.Headers)
		enq[j], ffirst[j] = timestamptz(m.EnqueuedAt), timestamptz(m.FirstFailedAt)
		failed[j], collected[j], updated[j] = m.FailedAt, m.CollectedAt, m.UpdatedAt
		status[j], owner[j], fp[j], replays[j] = string(m.Status), m.Owner, m.Fingerprint, int32(m.ReplayCount)
		refail[j], flags[j], dkey[j], krule[j] = m.RefailOf, encodeFlags(m.Flags), m.DedupeKey, m.KeyRule
		var t *string
		bin[j], t = splitPayload(m.Payload)
		if t != nil {
			txt[j] = pgtype.Text{String: *t, Valid: true}
		}
		room += len(id[j]) + len(source[j]) + len(kind[j]) + len(queue[j]) + len(job[j]) + len(msgID[j]) +
			len(idem[j]) + len(schema[j]) + len(class[j]) + len(reason[j]) + len(ctype[j]) + len(sha[j]) +
			len(headers[j]) + len(status[j]) + len(owner[j]) + len(fp[j]) + len(refail[j]) + len(flags[j]) +
			len(dkey[j]) + len(krule[j]) + len(m.Payload)
	}
	return []any{id, source, kind, queue, job, msgID, idem, schema, attempts, class, reason,
		size, ctype, sha, version, headers, enq, ffirst, failed, collected, updated,
		status, owner, fp, replays, refail, flags, dkey, bin, txt, krule}, room
}

// presized is the first argument of insertMessages (a text array), whose
// encoding first makes room in pgx's buffer for the encoding of all the
// arguments, room bytes. pgx starts each statement with a buffer of 256 bytes
// and appends every array element to it: the 0.8 MB of a batch of 500
// messages of 1 KiB was copied over and over as the buffer grew by a
// quarter at a time (BenchmarkEncodeInsert; docs/benchmarks.md).
type presized struct {
	v    []string
	room int
}

// presizePlan encodes a presized argument.
type presizePlan struct{ next pgtype.EncodePlan }

func (p *presizePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *presizePlan) Encode(value any, buf []byte) ([]byte, error) {
	v := value.(presized)
	return p.next.Encode(v.v, slices.Grow(buf, v.room))
}

// tryWrapPresized is the pgtype.TryWrapEncodePlanFunc of presized values.
func tryWrapPresized(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if v, ok := value.(presized); ok {
		return &presizePlan{}, v.v, true
	}
	return nil, nil, false
}

// presize teaches m (a connection's type map) to encode presized
// arguments, once.
func presize(m *pgtype.Map) {
	if fs := m.TryWrapEncodePlanFuncs; len(fs) > 0 && reflect.ValueOf(fs[0]).Pointer() == reflect.ValueOf(tryWrapPresized).Pointer() {
		return
	}
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapPresized}, m.TryWrapEncodePlanFuncs...)
}

// timestamptz is t as a nullable timestamptz (NULL for nil).
func timestamptz(t *time.Time) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: *t, Valid: true}
}

// splitPayload decides where a payload is stored: as text when it is
// valid UTF-8 without NUL (searchable), as bytes otherwise. The text
// shares p's bytes instead of copying them (a kilobyte a message on the
// collectors' path): use it only as an argument of the statement that
// stores it, while p does not change.
func splitPayload(p []byte) (bin []byte, txt *string) {
	if utf8.Valid(p) && !containsNUL(p) {
		s := unsafe.String(unsafe.SliceData(p), len(p))
		return nil, &s
	}
	return p, nil
}

// joinPayload is the inverse of splitPayload.
func joinPayload(bin []byte, txt *string) []byte {
	if txt != nil {
		return []byte(*txt)
	}
	if bin == nil {
		return []byte{}
	}
	return bin
}

func containsNUL(p []byte) bool { return bytes.IndexByte(p, 0) >= 0 }

func mk(n int) []string { return make([]string, n) }

// encodeHeaders returns h as JSON, as json.Marshal writes it (keys
// sorted, HTML characters escaped).
func encodeHeaders(h map[string]string) string {
	if len(h) == 0 {
		return "{}"
	}
	if b, ok := appendHeaders(make([]byte, 0, 64*len(h)), h); ok {
		return string(b)
	}
	b, _ := json.Marshal(h) // a map of strings always marshals
	return string(b)
}

// appendHeaders is encodeHeaders without reflection, for the headers
// brokers usually give (x-death included): it gives up (ok false) on a
// name or value holding anything but printable ASCII other than <, > and
// &, whose escapes it leaves to json.Marshal.
func appendHeaders(b []byte, h map[string]string) ([]byte, bool) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendPlainString(b, k); !ok {
			return nil, false
		}
		b = append(b, ':')
		if b, ok = appendPlainString(b, h[k]); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// appendPlainString appends s as a JSON string when it holds only
// printable ASCII other than <, > and & (quotes and backslashes are
// escaped as encoding/json escapes them).
func appendPlainString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&':
			return nil, false
		case c == '"' || c == '\\':
			b = append(b, s[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

func encodeFlags(f []string) string {
	if len(f) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// getMessageSQL reads one message and its current payload.
const getMessageSQL = `SELECT ` + messageColumns + `, pv.payload, pv.payload_text
FROM messages m
JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
WHERE m.id = $1`

// GetMessage returns one message with its current payload. Errors:
// ENOTFOUND, EUNAVAILABLE, EINTERNAL.
func (s *Store) GetMessage(ctx context.Context, id string) (*quarantine.Message, error) {
	if !quarantine.ValidID(id) {
		return nil, notfound.Message(id)
	}
	m, err := getMessage(ctx, s.pool, id)
	if err != nil {
		return nil, translate(err, "get message")
	}
	return m, nil
}

// querier is what a pool and a transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getMessage reads one message with its current payload, or ENOTFOUND.
func getMessage(ctx context.Context, q querier, id string) (*quarantine.Message, error) {
	var r messageRow
	var bin []byte
	var txt *string
	err := q.QueryRow(ctx, getMessageSQL, id).Scan(append(r.dest(), &bin, &txt)...)
	if err != nil {
		return nil, orNotFound(err, notfound.Message(id))
	}
	m, err := r.message()
	if err != nil {
		return nil, err
	}
	m.Payload = joinPayload(bin, txt)
	return m, nil
}
