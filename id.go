package quarantine

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new time-ordered identifier (a ULID, 26 characters of
// Crockford base32) for time t. IDs sort by t's millisecond; IDs made in
// one process for non-decreasing times sort in creation order, even within
// one millisecond.
func NewID(t time.Time) string {
	idMu.Lock()
	defer idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), idEntropy).String()
}

// ValidID reports whether s has the form of an ID made by NewID.
func ValidID(s string) bool {
	_, err := ulid.ParseStrict(s)
	return err == nil
}
