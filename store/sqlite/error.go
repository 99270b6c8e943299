package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// translate turns a driver error into a *quarantine.Error: the one place
// where SQLite result codes get their meaning. what says what was being
// done ("list messages"). A *quarantine.Error passes through unchanged.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var qe *quarantine.Error
	if errors.As(err, &qe) {
		return qe
	}
	switch {
	case noRows(err):
		return orNotFound(err, notfound.Row())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the request was cancelled or timed out", Err: err}
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the database is busy, try again", Err: err}
		case sqlite3.SQLITE_CONSTRAINT:
			return &quarantine.Error{Code: quarantine.ECONFLICT, Message: "the change conflicts with stored data", Err: err}
		case sqlite3.SQLITE_INTERRUPT:
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the request was cancelled or timed out", Err: err}
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
			return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the database cannot be written or read", Err: err}
		case sqlite3.SQLITE_TOOBIG:
			return &quarantine.Error{Code: quarantine.EINVALID, Message: "a value is too large to store", Err: err}
		}
	}
	return quarantine.Internal(err, "cannot %s", what)
}

// Translate is translate for the shared methods (shared.Backend).
func (p backend) Translate(err error, what string) error { return translate(err, what) }

// orNotFound returns nf, wrapping err, when err says no rows (noRows:
// the record looked up does not exist), and err unchanged otherwise (nil
// included), for translate to interpret. Every not-found of the store
// comes from store/internal/notfound, the same in both stores.
func orNotFound(err error, nf *quarantine.Error) error { return notfound.If(noRows(err), err, nf) }

// noRows reports whether err is the driver's "no rows": the record looked
// up does not exist. It is the one place of the store that looks at it.
func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// isBusy reports whether err is SQLite's "another connection holds the lock".
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

// isConstraint reports whether err is a constraint violation.
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
