package sqlite

import (
	"strings"
	"time"
)

// clause collects the conditions of a WHERE clause and their bound
// arguments: values are always bound, never spliced into the SQL.
type clause struct {
	conds []string
	args  []any
}

// add adds cond, with the arguments of its placeholders.
func (c *clause) add(cond string, args ...any) {
	c.conds = append(c.conds, cond)
	c.args = append(c.args, args...)
}

// in adds col = ? or col IN (?, …) for vals; nothing when there are none.
func (c *clause) in(col string, vals []string) {
	switch len(vals) {
	case 0:
		return
	case 1:
		c.conds = append(c.conds, col+" = ?")
	default:
		c.conds = append(c.conds, col+" IN (?"+strings.Repeat(", ?", len(vals)-1)+")")
	}
	for _, v := range vals {
		c.args = append(c.args, v)
	}
}

// between adds col >= after and col < before (col in micros), each only
// when set.
func (c *clause) between(col string, after, before time.Time) {
	if !after.IsZero() {
		c.add(col+" >= ?", micros(after))
	}
	if !before.IsZero() {
		c.add(col+" < ?", micros(before))
	}
}

// where is " WHERE " and the conditions joined by AND, or "" when there
// are none.
func (c *clause) where() string {
	if len(c.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.conds, " AND ")
}
