package web

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// overviewRoutes registers the overview: per queue counts, ages against alarms, inflow and age charts.
func (h *Handler) overviewRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /overview", h.authed(h.overview))
}

// Age levels of a queue's oldest quarantined message against the
// smallest max_age of its alarms.
const (
	ageNone = "none" // nothing waits
	ageOK   = "ok"   // under half of max_age, or no alarm
	ageWarn = "warn" // at least half of max_age
	ageOver = "over" // past max_age
)

// statusCell is one count of a queue row, with the messages link.
type statusCell struct {
	Status quarantine.Status
	N      int64
	URL    string
}

// queueRow is one queue of the overview.
type queueRow struct {
	Queue, Owner string
	URL          string // its messages
	Counts       []statusCell
	Waiting      int64
	Oldest       *time.Time
	OldestURL    string
	// MaxAge is the smallest max_age of the alarms covering the queue,
	// 0 when none does; Level is the oldest age against it.
	MaxAge   time.Duration
	MaxAgeS  string
	AgeLevel string
	Inflow   barChart
	Firing   []quarantine.AlarmState
}

type overviewContent struct {
	Now      time.Time
	Statuses []quarantine.Status
	Queues   []queueRow
	Alarms   []quarantine.AlarmState // firing or pending, on visible queues
	Age      barChart
	AgeRows  []ageRow
	History  lineChart
	HistRows []historyRow
	Waiting  int64
}

// overview is GET /overview: every queue the token may see.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, s *session) {
	c, err := h.overviewView(r.Context(), s.token, h.cfg.Now().UTC())
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Token: s.token, CSRF: s.csrf, Content: c})
}

// queueStats returns the counts by status and the oldest quarantined
// message of each queue of f. Unscoped, they are the store's kept counts
// and one probe per queue (CountByQueue, OldestQuarantined), which is
// what QueueStats does too, without its inflow counts: the overview
// counts the inflow by the hour. A scoped token's oldest message must be
// one of its owners': QueueStats finds it.
func (h *Handler) queueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	if len(f.Owner) > 0 {
		return h.cfg.Store.QueueStats(ctx, f, now)
	}
	counts, err := h.cfg.Store.CountByQueue(ctx, f)
	if err != nil {
		return nil, err
	}
	oldest, err := h.cfg.Store.OldestQuarantined(ctx)
	if err != nil {
		return nil, err
	}
	byQueue := make(map[string]quarantine.QueueOldest, len(oldest))
	for _, o := range oldest {
		byQueue[o.Queue] = o
	}
	var out []quarantine.QueueStats
	for _, c := range counts {
		if len(out) == 0 || out[len(out)-1].Queue != c.Queue {
			st := quarantine.QueueStats{Queue: c.Queue, Counts: map[quarantine.Status]int64{}}
			if o, ok := byQueue[c.Queue]; ok {
				at := o.FailedAt
				st.OldestQuarantinedAt, st.OldestID = &at, o.MessageID
			}
			out = append(out, st)
		}
		out[len(out)-1].Counts[c.Status] += c.Count
	}
	return out, nil
}

// queueRow is st as the overview shows it.
func (h *Handler) queueRow(st quarantine.QueueStats, now time.Time) queueRow {
	owner := st.Owner
	if owner == "" {
		owner = quarantine.AssignOwner(h.cfg.Owners, st.Queue)
	}
	row := queueRow{Queue: st.Queue, Owner: owner, Waiting: st.Counts[quarantine.StatusQuarantined],
		URL: "/messages?" + url.Values{"queue": {st.Queue}}.Encode(), AgeLevel: ageNone}
	for _, status := range quarantine.Statuses {
		row.Counts = append(row.Counts, statusCell{Status: status, N: st.Counts[status],
			URL: "/messages?" + url.Values{"queue": {st.Queue}, "status": {string(status)}}.Encode()})
	}
	row.MaxAge = h.maxAge(st.Queue, owner)
	if row.MaxAge > 0 {
		row.MaxAgeS = row.MaxAge.String()
	}
	if st.OldestQuarantinedAt != nil {
		row.Oldest = st.OldestQuarantinedAt
		row.OldestURL = "/messages/" + st.OldestID
		age := now.Sub(*st.OldestQuarantinedAt)
		switch {
		case row.MaxAge > 0 && age > row.MaxAge:
			row.AgeLevel = ageOver
		case row.MaxAge > 0 && age >= row.MaxAge/2:
			row.AgeLevel = ageWarn
		default:
			row.AgeLevel = ageOK
		}
	}
	return row
}

// maxAge is the smallest max_age of the alarms covering queue (of
// owner), 0 when none does.
func (h *Handler) maxAge(queue, owner string) time.Duration {
	var m time.Duration
	for i := range h.cfg.Alarms {
		if a := &h.cfg.Alarms[i]; a.Matches(queue, owner) && (m == 0 || a.MaxAge < m) {
			m = a.MaxAge
		}
	}
	return m
}
