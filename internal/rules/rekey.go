package rules

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// RekeyAs runs a re-key of the messages of f within the owners of token
// t, as t's actor (see collect.Preparer.Rekey).
func RekeyAs(ctx context.Context, t *quarantine.Token, p *collect.Preparer, st collect.RekeyStore, f quarantine.Filter, req collect.RekeyRequest) (quarantine.RekeyResult, error) {
	req.Actor = t.Actor()
	if !Scope(t, &f) { // only other teams' owners were asked for: nothing matches
		return quarantine.RekeyResult{DryRun: req.DryRun, Changes: []quarantine.KeyChange{}}, nil
	}
	req.Filter = f
	return p.Rekey(ctx, st, req)
}
