package quarantine_test

import (
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestRoleOfGroups(t *testing.T) {
	t.Parallel()
	m := []quarantine.GroupRole{
		{Group: "pay-viewers", Role: quarantine.RoleViewer, Owners: []string{"payments"}},
		{Group: "pay-ops", Role: quarantine.RoleOperator, Owners: []string{"payments", "billing"}},
		{Group: "rep-ops", Role: quarantine.RoleOperator, Owners: []string{"reports"}},
		{Group: "sre", Role: quarantine.RoleViewer},
		{Group: "admins", Role: quarantine.RoleAdmin},
	}
	for _, c := range []struct {
		name   string
		groups []string
		role   quarantine.Role
		owners []string
		ok     bool
	}{
		{"no group", nil, "", nil, false},
		{"unmapped groups", []string{"staff", "PAY-OPS"}, "", nil, false},
		{"one group", []string{"pay-viewers"}, quarantine.RoleViewer, []string{"payments"}, true},
		{"highest role, union of owners", []string{"pay-viewers", "rep-ops", "staff"}, quarantine.RoleOperator, []string{"payments", "reports"}, true},
		{"union without duplicates", []string{"pay-ops", "pay-viewers"}, quarantine.RoleOperator, []string{"billing", "payments"}, true},
		{"a group of every owner", []string{"rep-ops", "sre"}, quarantine.RoleOperator, nil, true},
		{"admin", []string{"sre", "admins"}, quarantine.RoleAdmin, nil, true},
	} {
		role, owners, ok := quarantine.RoleOfGroups(m, c.groups)
		if role != c.role || !slices.Equal(owners, c.owners) || ok != c.ok {
			t.Errorf("%s: RoleOfGroups = %q %v %v, want %q %v %v", c.name, role, owners, ok, c.role, c.owners, c.ok)
		}
	}
}
