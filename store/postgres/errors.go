package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// translate turns a driver error into a *quarantine.Error; what says what
// the store was doing ("insert messages") and becomes part of the message
// of internal errors, which are logged, never shown. It is the one place
// where PostgreSQL error codes are interpreted.
//
//   - nil stays nil, and a *quarantine.Error passes unchanged;
//   - no rows (noRows) is ENOTFOUND;
//   - a cancelled or timed-out context is EUNAVAILABLE wrapping the
//     context's error, so errors.Is(err, context.Canceled) still holds;
//   - unique violations (23505) are ECONFLICT;
//   - invalid text (22021 invalid byte sequence, 22P05 untranslatable
//     character), data exceptions (class 22) and values too large to index
//     (54000) are EINVALID;
//   - failed connection attempts (whatever the server said), connection
//     failures, server shutdowns, too many connections,
//     serialization failures and deadlocks are EUNAVAILABLE (try again);
//   - anything else is EINTERNAL.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var qe *quarantine.Error
	if errors.As(err, &qe) {
		return err
	}
	if noRows(err) {
		return orNotFound(err, notfound.Row())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: what + ": the request was cancelled or timed out", Err: err}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// Whatever the server said (no such database, bad password), the
		// store cannot reach its database.
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "cannot connect to the database", Err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return translatePg(pe, err, what)
	}
	if unavailable(err) {
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the database is unavailable", Err: err}
	}
	return quarantine.Internal(err, "%s", what)
}

// Translate is translate for the shared methods (shared.Backend).
func (p backend) Translate(err error, what string) error { return translate(err, what) }

func translatePg(pe *pgconn.PgError, err error, what string) error {
	code := pe.Code
	switch {
	case code == "23505":
		return &quarantine.Error{Code: quarantine.ECONFLICT, Message: "a conflicting record already exists", Err: err}
	case code == "22021" || code == "22P05":
		return &quarantine.Error{Code: quarantine.EINVALID, Message: "a value is not valid text", Err: err}
	case code == "54000":
		return &quarantine.Error{Code: quarantine.EINVALID, Message: "a value is too large to store", Err: err}
	case strings.HasPrefix(code, "22"):
		return &quarantine.Error{Code: quarantine.EINVALID, Message: "a value is not acceptable", Err: err}
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "57P"),   // operator intervention: shutdown, cannot connect now
		strings.HasPrefix(code, "53"),    // insufficient resources: too many connections, disk full
		code == "40001", code == "40P01": // serialization failure, deadlock: try again
		return &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "the database is unavailable, try again", Err: err}
	}
	return quarantine.Internal(err, "%s", what)
}

// orNotFound returns nf, wrapping err, when err says no rows (noRows:
// the record looked up does not exist), and err unchanged otherwise (nil
// included), for translate to interpret. Every not-found of the store
// comes from store/internal/notfound, the same in both stores.
func orNotFound(err error, nf *quarantine.Error) error { return notfound.If(noRows(err), err, nf) }

// noRows reports whether err is the driver's "no rows": the record looked
// up does not exist. It is the one place of the store that looks at it.
func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// unavailable reports whether err says the database could not be reached
// or the connection broke.
func unavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed), pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	return strings.Contains(err.Error(), "closed pool")
}
