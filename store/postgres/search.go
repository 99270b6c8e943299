package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// The search index (migration 0005): triggers queue the IDs of new and
// changed messages in search_pending; the indexer takes them in queue
// order, folds each message's reason, job name and current payload text
// (search.Doc) and writes the document to search_docs, whose key's pg_trgm GIN
// index serves Filter.Text. Folding and the GIN insertions are off the
// ingest path: an insert only writes one narrow row to search_pending.
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

// popPending takes up to n queued IDs, oldest first, each with the
// newest of its entries taken; the rows stay locked until the transaction
// ends, so two indexers never fold the same rows.
const popPending = `WITH taken AS (DELETE FROM search_pending WHERE seq IN (
	SELECT seq FROM search_pending ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING message_id, seq)
SELECT message_id, max(seq), count(*) FROM taken GROUP BY message_id`

// readDocs reads what the documents of the given messages are made of.
const readDocs = `SELECT m.id, m.failed_at, m.reason, m.job_name, pv.payload_text
FROM messages m
LEFT JOIN payload_versions pv ON pv.message_id = m.id AND pv.version = m.payload_version
WHERE m.id = ANY($1::text[])`

// A document is written only over one made for an older queue entry
// (migration 0012): an indexer that read a message before a change, and
// writes after another indexer folded the change, leaves the newer
// document alone.
const writeDocs = `INSERT INTO search_docs (message_id, failed_at, doc, seq)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[])
ON CONFLICT (message_id) DO UPDATE SET failed_at = EXCLUDED.failed_at, doc = EXCLUDED.doc, seq = EXCLUDED.seq
WHERE search_docs.seq < EXCLUDED.seq`

// IndexSearch indexes up to n queued messages in one transaction and
// returns how many queue entries it took (0: the queue is empty, or
// another indexer holds every entry). Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) IndexSearch(ctx context.Context, n int) (int, error) {
	var took int
	err := s.inTx(ctx, "index messages for search", func(tx pgx.Tx) error {
		took = 0
		rows, err := tx.Query(ctx, popPending, n)
		if err != nil {
			return err
		}
		var ids []string
		entry := map[string]int64{} // the newest entry taken of each message
		var id string
		var seq, count int64
		_, err = pgx.ForEachRow(rows, []any{&id, &seq, &count}, func() error {
			ids, entry[id] = append(ids, id), seq
			took += int(count)
			return nil
		})
		if err != nil {
			return err
		}
		if took == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, readDocs, ids)
		if err != nil {
			return err
		}
		var (
			out    []string
			at     []time.Time
			docs   []string
			seqs   []int64
			failed time.Time
			reason string
			job    string
			text   *string
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &failed, &reason, &job, &text}, func() error {
			p := ""
			if text != nil {
				p = *text
			}
			out, at, docs = append(out, id), append(at, failed), append(docs, search.Doc(reason, job, p))
			seqs = append(seqs, entry[id])
			return nil
		})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, writeDocs, out, at, docs, seqs)
		return err
	})
	return took, err
}

// SearchLag returns how long the oldest message waiting for the search
// index has waited (0 when none waits). Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SearchLag(ctx context.Context) (time.Duration, error) {
	var lag time.Duration
	err := s.pool.QueryRow(ctx, `SELECT coalesce(clock_timestamp() - (SELECT queued_at FROM search_pending ORDER BY seq LIMIT 1), '0')`).Scan(&lag)
	return max(lag, 0), translate(err, "measure the search lag")
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
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM search_pending ORDER BY seq LIMIT $1) q`, searchCatchUp+1).Scan(&queued)
	if err != nil {
		return translate(err, "search messages")
	}
	if queued == 0 || queued > searchCatchUp {
		return nil
	}
	for {
		n, err := s.IndexSearch(ctx, searchBatch)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	// Entries another indexer holds: wait for its transaction to end.
	_, err = s.pool.Exec(ctx, `SELECT 1 FROM search_pending ORDER BY seq LIMIT $1 FOR SHARE`, searchCatchUp)
	return translate(err, "search messages")
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
// (ingest goes first), until stopIndexer, on two workers: each pass takes its queue entries with SKIP LOCKED and
// writes only over older documents, as several instances do, and the
// folding and the GIN insertions of one pass leave the server's other
// cores idle (one worker indexed fewer than 1,000 messages a second).
func (s *Store) startIndexer() { s.idx = search.Start(s.idx, indexWorkers, s.IndexSearch, unmigrated) }

// indexWorkers is how many passes of the background indexer run at once.
const indexWorkers = 2

// inserting tells the indexer that an insert is under way, until done.
func (s *Store) inserting() (done func()) { return s.idx.Inserting() }

// unmigrated reports whether err says the search tables are missing: the
// store was opened before Migrate.
func unmigrated(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// stopIndexer stops the background loop and waits for it.
func (s *Store) stopIndexer() { s.idx.Stop() }
