// Package notfound holds the ENOTFOUND errors of both stores, so that a
// missing record reads the same whichever store answers. Each store turns
// its driver's "no rows" into one of them in one function (orNotFound in
// store/postgres/errors.go and store/sqlite/error.go).
package notfound

import "github.com/quarantine-dev/quarantine"

// Message: no message has the id.
func Message(id string) *quarantine.Error {
	return errorf("no message %q", quarantine.Clip(id))
}

// PayloadVersion: the message has no such payload version (or is gone).
func PayloadVersion(id string, version int) *quarantine.Error {
	return errorf("message %q has no payload version %d", quarantine.Clip(id), version)
}

// Token: no token has the secret (it is not named: it is a secret).
func Token() *quarantine.Error { return errorf("no such token") }

// TokenID: no token has the id.
func TokenID(id string) *quarantine.Error { return errorf("no token %q", quarantine.Clip(id)) }

// Session: no live session has the id hash (none was opened, it ended,
// or it was logged out). The hash is not named: it stands for a secret.
func Session() *quarantine.Error { return errorf("no such session") }

// Replay: no replay batch has the id.
func Replay(id string) *quarantine.Error { return errorf("no replay %q", quarantine.Clip(id)) }

// AlarmNotification: no alarm notification has the id.
func AlarmNotification(id int64) *quarantine.Error {
	return errorf("no alarm notification %d", id)
}

// Row: a record the store read without saying which (translate's answer
// to "no rows" that no caller named).
func Row() *quarantine.Error { return errorf("not found") }

// If returns a copy of nf wrapping err when missing (the store's driver
// said "no rows" for err), and err unchanged otherwise (nil included).
func If(missing bool, err error, nf *quarantine.Error) error {
	if !missing {
		return err
	}
	e := *nf
	e.Err = err
	return &e
}

func errorf(format string, args ...any) *quarantine.Error {
	return quarantine.Errorf(quarantine.ENOTFOUND, format, args...)
}
