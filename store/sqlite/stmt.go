package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxReadStmts bounds the statements a store keeps prepared: the SQL of
// an arc depends on the shape of its filter (how many values each field
// holds), so the set of texts is open; past the bound a query is
// prepared at each call as before.
const maxReadStmts = 128

// readStmts keeps prepared statements on the read connections, by SQL
// text. database/sql prepares one on each connection that runs it, once.
// Preparing the arc of a sample (two halves over messages, whose planner
// weighs its dozen indexes) is a good part of a sample's time
// (docs/benchmarks.md).
type readStmts struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// stmt returns the prepared statement of q, preparing it on db the first
// time, or nil (and no error) when the cache is full.
func (c *readStmts) stmt(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if len(c.m) >= maxReadStmts {
		return nil, nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st, nil
}

// close closes the statements.
func (c *readStmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// cachedQuerier runs queries on the read connections through the
// store's prepared statements.
type cachedQuerier struct{ s *Store }

func (c cachedQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.s.stmts.stmt(ctx, c.s.r, q)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.s.r.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}
