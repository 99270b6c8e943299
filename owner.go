package quarantine

import "path"

// OwnerRule gives the queues matching any of its glob patterns to a team.
type OwnerRule struct {
	Team   string   `yaml:"team" json:"team"`
	Queues []string `yaml:"queues" json:"queues"`
}

// AssignOwner returns the team of the first rule whose pattern matches
// queue (path.Match syntax: *, ?, [..]), or "" when none does.
func AssignOwner(rules []OwnerRule, queue string) string {
	for _, r := range rules {
		for _, p := range r.Queues {
			if ok, _ := path.Match(p, queue); ok {
				return r.Team
			}
		}
	}
	return ""
}
