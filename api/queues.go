package api

import (
	"net/http"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// queueList is the body of GET /api/v1/queues.
type queueList struct {
	Items []queueView `json:"items"`
}

// queueView is a queue's statistics with every status counted (zero
// included) and the age of its oldest quarantined message.
type queueView struct {
	quarantine.QueueStats
	// OldestAgeSeconds is now minus the oldest quarantined failed_at; nil
	// when nothing is quarantined.
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
}

// listQueues answers, per queue of the filtered messages the token may
// see: its owner by the owner rules, counts by status, the oldest
// quarantined message and its age, and the inflow.
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	f, _, err := s.queryFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := queueList{Items: []queueView{}}
	if s.searchDenied(w, r, &f) {
		return
	}
	if !rules.Scope(tokenFrom(r.Context()), &f) {
		s.writeJSON(w, r, http.StatusOK, res)
		return
	}
	now := s.cfg.Now()
	stats, err := s.cfg.Store.QueueStats(r.Context(), f, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, q := range stats {
		q.Owner = quarantine.AssignOwner(s.cfg.Owners, q.Queue)
		counts := make(map[quarantine.Status]int64, len(quarantine.Statuses))
		for _, st := range quarantine.Statuses {
			counts[st] = q.Counts[st]
		}
		q.Counts = counts
		v := queueView{QueueStats: q}
		if q.OldestQuarantinedAt != nil {
			age := max(now.Sub(*q.OldestQuarantinedAt), 0).Round(time.Millisecond).Seconds()
			v.OldestAgeSeconds = &age
		}
		res.Items = append(res.Items, v)
	}
	s.writeJSON(w, r, http.StatusOK, res)
}
