package quarantine_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestValidateAlarms(t *testing.T) {
	t.Parallel()
	ok := quarantine.AlarmState{Alarm: "age", Queue: "q", State: quarantine.AlarmFiring}
	note := quarantine.AlarmNotification{Receiver: "hook", Kind: quarantine.AlarmKindFiring}
	for _, tc := range []struct {
		name   string
		states []quarantine.AlarmState
		notes  []quarantine.AlarmNotification
		field  string // "" when valid
	}{
		{"valid", []quarantine.AlarmState{ok}, []quarantine.AlarmNotification{note}, ""},
		{"nothing", nil, nil, ""},
		{"unknown state", []quarantine.AlarmState{ok, {Alarm: "age", Queue: "q", State: "sleeping"}}, nil, "state"},
		{"unnamed alarm", []quarantine.AlarmState{{Queue: "q", State: quarantine.AlarmPending}}, nil, "state"},
		{"unknown kind", nil, []quarantine.AlarmNotification{note, {Receiver: "hook", Kind: "maybe"}}, "kind"},
		{"no receiver", nil, []quarantine.AlarmNotification{{Kind: quarantine.AlarmKindResolved}}, "receiver"},
	} {
		err := quarantine.ValidateAlarms(tc.states, tc.notes)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
			t.Errorf("%s: %v, want EINVALID naming %s", tc.name, err, tc.field)
		}
	}
	for _, st := range quarantine.AlarmStatuses {
		if err := (quarantine.AlarmState{Alarm: "age", State: st}).Validate(); err != nil {
			t.Errorf("state %s: %v", st, err)
		}
	}
}
