package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// alarmList is the body of GET /api/v1/alarms.
type alarmList struct {
	Items []alarmView `json:"items"`
}

// alarmView is one alarm's state on one queue.
type alarmView struct {
	Alarm    string                 `json:"alarm"`
	Queue    string                 `json:"queue"`
	Owner    string                 `json:"owner"`
	State    quarantine.AlarmStatus `json:"state"`
	Since    time.Time              `json:"since"`
	ActiveAt *time.Time             `json:"active_at"`
	quarantine.AlarmReading
	UpdatedAt time.Time `json:"updated_at"`
}

// listAlarms answers the alarm states the evaluator keeps, by alarm and
// queue: a token with owners sees its owners' queues only.
func (s *Server) listAlarms(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return
	}
	states, err := s.cfg.Store.AlarmStates(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	owners := tokenFrom(r.Context()).Owners
	res := alarmList{Items: []alarmView{}}
	for _, a := range states {
		if len(owners) > 0 && !slices.Contains(owners, a.Owner) {
			continue
		}
		res.Items = append(res.Items, alarmView{Alarm: a.Alarm, Queue: a.Queue, Owner: a.Owner, State: a.State,
			Since: a.Since, ActiveAt: a.ActiveAt, AlarmReading: a.AlarmReading, UpdatedAt: a.UpdatedAt})
	}
	s.writeJSON(w, r, http.StatusOK, res)
}
