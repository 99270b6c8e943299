package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/store"
)

// readCounting counts the store reads a bulk action makes.
type readCounting struct {
	store.Store
	gets, owners atomic.Int64
}

func (c *readCounting) GetMessage(ctx context.Context, id string) (*quarantine.Message, error) {
	c.gets.Add(1)
	return c.Store.GetMessage(ctx, id)
}

func (c *readCounting) MessageOwners(ctx context.Context, ids []string) (map[string]string, error) {
	c.owners.Add(1)
	return c.Store.MessageOwners(ctx, ids)
}

// TestBulkDiscardChecksOwnersInOneQuery: a scoped token's bulk discard
// by ids learns the owners of all of them with one store query, never
// loading a message (with its payload) per id; the other team's ids are
// skipped as not found.
func TestBulkDiscardChecksOwnersInOneQuery(t *testing.T) {
	t.Parallel()
	counting := &readCounting{}
	e := newEnv(t, func(c *api.Config) { counting.Store = c.Store; c.Store = counting })
	ops := e.token("payments-ops", quarantine.RoleOperator, "payments")
	var ids, theirs []string
	for range 40 {
		ids = append(ids, e.ingestOne("payments.charges", "charge", `{"n":1}`))
	}
	for range 10 {
		id := e.ingestOne("orders.ship", "ship", `{"n":2}`)
		ids, theirs = append(ids, id), append(theirs, id)
	}
	gets, owners := counting.gets.Load(), counting.owners.Load()
	res := e.discardMany(ops, map[string]any{"ids": ids, "reason": "cleanup"})
	if len(res.Changed) != 40 || len(res.Skipped) != 10 {
		t.Fatalf("changed %d, skipped %d: want 40 and 10", len(res.Changed), len(res.Skipped))
	}
	want := map[string]bool{}
	for _, id := range theirs {
		want[id] = true
	}
	for _, sk := range res.Skipped {
		if !want[sk.ID] || sk.Reason != "not found" {
			t.Fatalf("skipped %+v, want the other team's ids as not found", sk)
		}
	}
	if n := counting.gets.Load() - gets; n != 0 {
		t.Fatalf("the discard loaded %d messages one by one, want none", n)
	}
	if n := counting.owners.Load() - owners; n != 1 {
		t.Fatalf("the discard asked for owners %d times, want once", n)
	}
	if evs := e.deniedTo("payments-ops"); len(evs) != 1 {
		t.Fatalf("%d access.denied events, want one for the other team's ids", len(evs))
	}
}
