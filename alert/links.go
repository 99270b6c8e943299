package alert

import (
	"net/url"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// MessagesURL is the UI's list of exactly the messages alarm r fires on
// for st: its queue, quarantined, and older than r.MaxAge when the age is
// what fires (a depth or inflow alarm, and a resolved one, shows the
// queue's quarantined messages). "" without a public URL.
func MessagesURL(public string, r *Rule, st quarantine.AlarmState, kind quarantine.AlarmKind) string {
	if public == "" {
		return ""
	}
	q := url.Values{"queue": {st.Queue}, "status": {string(quarantine.StatusQuarantined)}}
	if kind != quarantine.AlarmKindResolved && r.MaxAge > 0 && st.AgeSeconds >= r.MaxAge.Seconds() {
		q.Set("older_than", r.MaxAge.Round(time.Second).String())
	}
	return strings.TrimRight(public, "/") + "/messages?" + q.Encode()
}
