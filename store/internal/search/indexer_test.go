package search

import (
	"context"
	"errors"
	"testing"
)

func TestIndexerRunsUntilStopped(t *testing.T) {
	t.Parallel()
	type call struct {
		ctx context.Context
		n   int
	}
	calls := make(chan call, 1)
	ix := Start(nil, func(ctx context.Context, n int) (int, error) {
		select {
		case calls <- call{ctx, n}:
		default:
		}
		return 0, nil
	}, func(error) bool { return false })
	c := <-calls
	if c.n != Batch {
		t.Fatalf("an idle indexer asked for %d messages, want a batch of %d", c.n, Batch)
	}
	ix.Stop()
	if c.ctx.Err() == nil {
		t.Fatal("Stop returned with the indexer's context still live")
	}
}

func TestIndexerOff(t *testing.T) {
	t.Parallel()
	ix := Start(Off(), func(context.Context, int) (int, error) {
		t.Error("an indexer made by Off indexed")
		return 0, errors.New("off")
	}, func(error) bool { return true })
	if !ix.off {
		t.Fatal("Start replaced an Off indexer")
	}
	ix.Inserting()()
	ix.Stop()
	var none *Indexer // a store without one
	none.Inserting()()
	none.Stop()
}
