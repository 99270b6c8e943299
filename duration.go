package quarantine

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration as every configuration key and API
// field takes it: a Go duration (90s, 15m, 2h30m), whole days (7d), or
// days followed by a Go duration (1d12h). Spaces around it are ignored.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexByte(s, 'd')
	if i < 0 {
		return time.ParseDuration(s)
	}
	bad := errors.New("time: invalid duration " + strconv.Quote(s))
	days, err := strconv.ParseUint(s[:i], 10, 32)
	if err != nil || days > maxDays {
		return 0, bad
	}
	d := time.Duration(days) * 24 * time.Hour
	if rest := s[i+1:]; rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 || r > maxDuration-d {
			return 0, bad
		}
		d += r
	}
	return d, nil
}

// maxDays is the most days a duration may count (time.Duration holds
// about 106,751 days).
const maxDays = 100000

const maxDuration = time.Duration(1<<63 - 1)
