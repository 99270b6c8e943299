package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// The search index (migration 0006): InsertBatch queues the IDs of new
// messages in search_pending (queueSearch, one statement per batch),
// triggers those of changed ones; the indexer takes them in queue order,
// folds each message's reason, job name and current payload text
// (search.Doc) into search_docs and indexes it in search_fts (FTS5,
// trigram tokenizer). Folding and the FTS5 insertions are off the ingest
// path: an insert only writes one narrow row per message to search_pending.
// The same transaction writes the message's sampling keys to sample_ranks
// and fingerprint_ranks (indexRanks, migration 0013), so the queue is
// also what those tables lack, and SearchLag covers both.
//
// The background indexer (search.Run) polls every search.Poll and works
// until the queue is empty, so a message is searchable within about a
// second of its commit while ingest is calm. Ingest goes first: while an
// insert is under way the indexer waits, at most search.MaxDefer, and
// between inserts it indexes batches of search.BusyBatch, at most
// search.Share of the time; so under a steady ingest it keeps up, and
// during a burst that leaves no gap the index falls behind (SearchLag
// says by how much) and catches up after it.
// A search first indexes the queue itself when it holds at most
// searchCatchUp messages, so that it sees the writes made before it.
const (
	searchBatch   = 1000
	searchCatchUp = 5000
)

// IndexSearch indexes up to n queued messages in one write transaction
// and returns how many queue entries it took (0: the queue is empty).
// Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) IndexSearch(ctx context.Context, n int) (int, error) {
	var took int
	err := s.write(ctx, "index messages for search", func(tx *sql.Tx) error {
		took = 0
		rows, err := tx.QueryContext(ctx, `SELECT seq, message_id FROM search_pending ORDER BY seq LIMIT ?`, n)
		if err != nil {
			return err
		}
		var ids []string
		var last int64
		for rows.Next() {
			var id string
			if err := rows.Scan(&last, &id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		took = len(ids)
		if took == 0 {
			return nil
		}
		if err := indexDocs(ctx, tx, ids); err != nil {
			return err
		}
		if err := indexRanks(ctx, tx, ids); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM search_pending WHERE seq <= ?`, last)
		return err
	})
	return took, err
}

// indexDocs writes the documents of the messages ids (none for those
// gone; an ID may repeat) in tx: one query reads what they are made of
// and their current documents, each new or changed document is written
// to search_docs, and one statement indexes them all in search_fts.
// One statement matters: FTS5 writes its pending terms out as a new
// segment at the savepoint of each statement, so an INSERT per document
// made a segment per document, and merging them was most of the
// indexer's time (BenchmarkSearchIndexer: about 1,300 documents of 1 KiB
// per second that way, 5,500 in one statement).
func indexDocs(ctx context.Context, tx *sql.Tx, ids []string) error {
	type entry struct {
		failed     int64
		doc, old   string
		docid      int64
		exists, ok bool
	}
	docs := make(map[string]*entry, len(ids))
	var order []string // distinct IDs, in queue order
	for _, id := range ids {
		if docs[id] == nil {
			docs[id] = &entry{}
			order = append(order, id)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.failed_at, m.reason, m.job_name, pv.payload_text, d.docid, d.doc
		FROM messages m
		LEFT JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
		LEFT JOIN search_docs d ON d.message_id = m.id
		WHERE m.id IN (SELECT value FROM json_each(?))`, jsonArray(order))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, reason, job string
		var text, old sql.NullString
		var docid sql.NullInt64
		var failed int64
		if err := rows.Scan(&id, &failed, &reason, &job, &text, &docid, &old); err != nil {
			return err
		}
		if e := docs[id]; e != nil {
			*e = entry{failed: failed, doc: search.Doc(reason, job, text.String), old: old.String,
				docid: docid.Int64, exists: docid.Valid, ok: true}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO search_docs (message_id, failed_at, doc) VALUES (?, ?, ?) RETURNING docid`)
	if err != nil {
		return err
	}
	defer ins.Close()
	var fresh []int64 // the docids to index
	for _, id := range order {
		e := docs[id]
		switch {
		case !e.ok, e.exists && e.old == e.doc:
			continue // gone, or unchanged
		case e.exists:
			if _, err := tx.ExecContext(ctx, `INSERT INTO search_fts (search_fts, rowid, doc) VALUES ('delete', ?, ?)`, e.docid, e.old); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE search_docs SET doc = ? WHERE docid = ?`, e.doc, e.docid); err != nil {
				return err
			}
		default:
			if err := ins.QueryRowContext(ctx, id, e.failed, e.doc).Scan(&e.docid); err != nil {
				return err
			}
		}
		fresh = append(fresh, e.docid)
	}
	if len(fresh) == 0 {
		return nil
	}
	b, err := json.Marshal(fresh)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO search_fts (rowid, doc)
		SELECT docid, doc FROM search_docs WHERE docid IN (SELECT value FROM json_each(?)) ORDER BY docid`, string(b))
	return err
}

// indexRanks writes the sampling keys of the messages ids (none for
// those gone; an ID may repeat, and an edited message is queued again
// after its keys were written: OR IGNORE) to sample_ranks and
// fingerprint_ranks in tx, the transaction that takes them off
// search_pending (migration 0013): one statement per table, in key
// order, so that neighbouring keys share their pages.
func indexRanks(ctx context.Context, tx *sql.Tx, ids []string) error {
	list := jsonArray(ids)
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO sample_ranks (sample_rank, id)
		SELECT sample_rank, id FROM messages WHERE id IN (SELECT value FROM json_each(?)) ORDER BY sample_rank, id`, list); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO fingerprint_ranks (fingerprint, sample_rank, id)
		SELECT fingerprint, sample_rank, id FROM messages WHERE id IN (SELECT value FROM json_each(?)) ORDER BY fingerprint, sample_rank, id`, list)
	return err
}

// queueSearch queues the new messages msgs[idx] for the index in tx,
// the insert's transaction, each with its rank (rows[idx], for the
// pending half of a sample's arc: migration 0013): one statement for the
// batch. (Migration 0009 dropped the row trigger that did it: a trigger
// makes each INSERT of a message write two tables, so SQLite gave each
// one a statement journal, a copy of every page of messages and its
// indexes that the INSERT changed.)
func queueSearch(ctx context.Context, tx *sql.Tx, msgs []*quarantine.Message, rows []row, idx []int) error {
	at := micros(time.Now())
	switch len(idx) {
	case 0:
		return nil
	case 1:
		_, err := tx.ExecContext(ctx, `INSERT INTO search_pending (message_id, queued_at, sample_rank) VALUES (?, ?, ?)`,
			msgs[idx[0]].ID, at, rows[idx[0]].rank)
		return err
	}
	entries := make([][2]any, len(idx))
	for j, i := range idx {
		entries[j] = [2]any{msgs[i].ID, rows[i].rank}
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO search_pending (message_id, queued_at, sample_rank)
		SELECT j.value->>0, ?, j.value->>1 FROM json_each(?) j ORDER BY j.key`, at, string(b))
	return err
}

// SearchLag returns how long the oldest message waiting for the search
// index has waited (0 when none waits). Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SearchLag(ctx context.Context) (time.Duration, error) {
	var at sql.NullInt64
	err := s.read(ctx, "measure the search lag", func(tx *sql.Tx) error {
		// The first queued, by its key: a probe however long the queue
		// (min(queued_at) scans it).
		err := tx.QueryRowContext(ctx, `SELECT queued_at FROM search_pending ORDER BY seq LIMIT 1`).Scan(&at)
		if noRows(err) {
			return nil
		}
		return err
	})
	if err != nil || !at.Valid {
		return 0, err
	}
	return max(s.now().Sub(fromMicros(at.Int64)), 0), nil
}

// searchReady indexes what is queued before a search on text, when the
// queue is short enough to do it now; a longer queue is left to the
// background indexer (the search then misses the newest messages, for
// at most the lag SearchLag reports).
func (s *Store) searchReady(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	var queued int
	err := s.read(ctx, "search messages", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM search_pending LIMIT ?)`, searchCatchUp+1).Scan(&queued)
	})
	if err != nil || queued == 0 || queued > searchCatchUp {
		return err
	}
	for {
		n, err := s.IndexSearch(ctx, searchBatch)
		if err != nil || n == 0 {
			return err
		}
	}
}

// indexer is the store's background search indexer.
type indexer = search.Indexer

// WithoutSearchIndexer opens the store without its background search
// indexer: messages are then indexed only by IndexSearch and by the
// searches that find a short queue (tests of the lag use it).
func WithoutSearchIndexer() Option {
	return func(s *Store) { s.idx = search.Off() }
}

// startIndexer runs IndexSearch in the background, paced by search.Run
// (ingest goes first), until stopIndexer, on one worker: its passes
// write through the single writer.
func (s *Store) startIndexer() { s.idx = search.Start(s.idx, 1, s.IndexSearch, unmigrated) }

// inserting tells the indexer that an insert is under way, until done.
func (s *Store) inserting() (done func()) { return s.idx.Inserting() }

// unmigrated reports whether err says the search tables are missing: the
// store was opened before Migrate.
func unmigrated(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), "no such table") {
			return true
		}
	}
	return false
}

// stopIndexer stops the background loop and waits for it.
func (s *Store) stopIndexer() { s.idx.Stop() }
