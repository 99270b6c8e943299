package quarantine

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status (rules.ErrorStatus, used by the
// REST API and the web UI) and to one problem type on the wire.
const (
	EINVALID       = "invalid"             // the request or the input is wrong
	EUNPROCESSABLE = "unprocessable"       // well formed, but violates a rule (422)
	ENOTFOUND      = "not_found"           // no such resource
	ECONFLICT      = "conflict"            // the resource's state forbids it now
	EPRECONDITION  = "precondition_failed" // If-Match is stale
	ETOOLARGE      = "too_large"           // body above the hard limit
	EUNAUTHORIZED  = "unauthorized"        // no valid credentials
	EFORBIDDEN     = "forbidden"           // valid credentials, not allowed
	EUNAVAILABLE   = "unavailable"         // a dependency is down
	EINTERNAL      = "internal"            // a bug or an unexpected failure
)

// Error is the one error type of the domain. Message is safe to show to the
// caller; Err (the cause) is logged, never shown. Field names the offending
// input (a query parameter, a JSON Pointer into a body, a config key) when
// there is one.
type Error struct {
	Code    string
	Message string
	Field   string
	Err     error
}

// Errorf returns an *Error with the code and a formatted, user-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an *Error that names the offending field.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Internal wraps an unexpected error; its text is never shown to callers.
func Internal(err error, format string, args ...any) *Error {
	return &Error{Code: EINTERNAL, Message: fmt.Sprintf(format, args...), Err: err}
}

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the user-safe message of err. Errors that are not an
// *Error, and EINTERNAL errors, give a generic text so that internals never
// leak.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != EINTERNAL {
		return e.Message
	}
	return "internal error"
}

// ErrorField returns the offending field of err, or "".
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
