package quarantine

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// GroupRole gives the members of an identity provider's group a role,
// limited to Owners (none: every owner), as config auth.oidc.roles says.
type GroupRole struct {
	Group  string   `yaml:"group"`
	Role   Role     `yaml:"role"`
	Owners []string `yaml:"owners"`
}

// Validate checks one mapping: a group, a known role, sane owners.
func (g GroupRole) Validate() error {
	if strings.TrimSpace(g.Group) == "" || len(g.Group) > 400 || !utf8.ValidString(g.Group) {
		return FieldErrorf(EINVALID, "group", "a mapping needs a group name (valid UTF-8, at most 400 bytes)")
	}
	if !g.Role.Valid() {
		return FieldErrorf(EINVALID, "role", "unknown role %q (one of viewer, operator, admin)", truncateForError(string(g.Role)))
	}
	for _, o := range g.Owners {
		if o == "" || len(o) > 200 || !utf8.ValidString(o) || strings.ContainsRune(o, 0) {
			return FieldErrorf(EINVALID, "owners", "owner names must be non-empty valid UTF-8, at most 200 bytes")
		}
	}
	return nil
}

// RoleOfGroups returns what a person in groups gets from mappings: the
// highest role of the mappings of their groups, and the union of those
// mappings' owners, where a mapping without owners gives every owner (the
// result has no owners then). ok is false when none of groups is mapped.
func RoleOfGroups(mappings []GroupRole, groups []string) (role Role, owners []string, ok bool) {
	every := false
	for _, m := range mappings {
		if !slices.Contains(groups, m.Group) {
			continue
		}
		ok = true
		if roleRank[m.Role] > roleRank[role] {
			role = m.Role
		}
		if len(m.Owners) == 0 {
			every = true
		}
		for _, o := range m.Owners {
			if !slices.Contains(owners, o) {
				owners = append(owners, o)
			}
		}
	}
	if every {
		owners = nil
	}
	slices.Sort(owners)
	return role, owners, ok
}
