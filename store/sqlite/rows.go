package sqlite

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// queryAll runs q in tx (a transaction or a connection pool) and reads
// every row with scan, in order: an empty slice, not nil, when there are
// none (as pgx.CollectRows answers for PostgreSQL's store).
func queryAll[T any](ctx context.Context, tx querier, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanMessageRow reads messageColumns (scanMessage without extra
// destinations).
func scanMessageRow(r scanner) (*quarantine.Message, error) { return scanMessage(r) }
