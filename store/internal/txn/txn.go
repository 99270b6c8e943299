// Package txn holds the one shape of a store method that owns its
// transaction and hands back what the work in it found: both stores
// (store/postgres, store/sqlite) run their work through it, each with its
// own transaction runner.
package txn

import "context"

// Runner runs fn in one transaction of a store, committed when fn returns
// nil and rolled back otherwise; what names the work in its errors. Each
// store's runners have this shape (PostgreSQL's inTx, SQLite's write and
// read).
type Runner[Tx any] func(ctx context.Context, what string, fn func(tx Tx) error) error

// Get runs f in one transaction of run and returns what f returned once
// the transaction is committed; on any error it returns T's zero value
// (never a result of a transaction that was rolled back) and the error.
func Get[Tx, T any](ctx context.Context, run Runner[Tx], what string, f func(tx Tx) (T, error)) (T, error) {
	var out T
	err := run(ctx, what, func(tx Tx) (err error) {
		out, err = f(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}
