package alert

import (
	"time"

	"github.com/quarantine-dev/quarantine"
)

// step moves st (the state of rule r on one queue) to its next state
// given the values measured at now, and returns the notification kinds
// it owes: firing when it fires, repeat every r.Repeat while firing,
// refresh every resend while firing (for Alertmanager), resolved when it
// stops firing. A pending alarm whose condition stops holding goes back
// to inactive and owes nothing. Pure: no I/O.
func step(r *Rule, st quarantine.AlarmState, v values, now time.Time, resend time.Duration) (quarantine.AlarmState, []quarantine.AlarmKind) {
	reason := r.breach(v)
	st.Reason, st.AgeSeconds, st.Depth, st.InflowPerMinute = reason, v.age.Seconds(), v.depth, v.inflow
	at := now
	var kinds []quarantine.AlarmKind
	fire := func() {
		st.State, st.Since, st.NotifiedAt, st.ResentAt = quarantine.AlarmFiring, now, &at, &at
		kinds = append(kinds, quarantine.AlarmKindFiring)
	}
	switch st.State {
	case quarantine.AlarmPending:
		switch {
		case reason == "":
			st.State, st.Since, st.ActiveAt = quarantine.AlarmInactive, now, nil
		case st.ActiveAt == nil || !now.Before(st.ActiveAt.Add(r.For)):
			fire()
		}
	case quarantine.AlarmFiring:
		if reason == "" {
			st.State, st.Since = quarantine.AlarmResolved, now
			kinds = append(kinds, quarantine.AlarmKindResolved)
			break
		}
		if r.Repeat > 0 && (st.NotifiedAt == nil || !now.Before(st.NotifiedAt.Add(r.Repeat))) {
			st.NotifiedAt = &at
			kinds = append(kinds, quarantine.AlarmKindRepeat)
		}
		if resend > 0 && (st.ResentAt == nil || !now.Before(st.ResentAt.Add(resend))) {
			st.ResentAt = &at
			kinds = append(kinds, quarantine.AlarmKindRefresh)
		}
	default: // inactive, resolved, or new
		if st.State == "" {
			st.State, st.Since = quarantine.AlarmInactive, now
		}
		if reason == "" {
			break
		}
		st.State, st.Since, st.ActiveAt, st.NotifiedAt, st.ResentAt = quarantine.AlarmPending, now, &at, nil, nil
		if r.For <= 0 {
			fire()
		}
	}
	return st, kinds
}

// event is what a notification of kind says about st.
func event(st quarantine.AlarmState, kind quarantine.AlarmKind, now time.Time) quarantine.AlarmEvent {
	ev := quarantine.AlarmEvent{Alarm: st.Alarm, Queue: st.Queue, Owner: st.Owner, Status: quarantine.AlarmFiring,
		AlarmReading: st.AlarmReading, At: now}
	if st.ActiveAt != nil {
		ev.StartsAt = *st.ActiveAt
	}
	if kind == quarantine.AlarmKindResolved {
		end := now
		ev.Status, ev.EndsAt = quarantine.AlarmResolved, &end
	}
	return ev
}
