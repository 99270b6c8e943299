package search

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestIndexerRunsUntilStopped(t *testing.T) {
	t.Parallel()
	type call struct {
		ctx context.Context
		n   int
	}
	calls := make(chan call, 1)
	ix := Start(nil, 1, func(ctx context.Context, n int) (int, error) {
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
	ix := Start(Off(), 1, func(context.Context, int) (int, error) {
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

// Workers index at once: each pass waits here until the other has
// started too.
func TestIndexerWorkersRunAtOnce(t *testing.T) {
	t.Parallel()
	var both sync.WaitGroup
	both.Add(2)
	met := make(chan struct{}, 2)
	ix := Start(nil, 2, func(ctx context.Context, n int) (int, error) {
		both.Done()
		both.Wait()
		select {
		case met <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return 0, ctx.Err()
	}, func(error) bool { return true })
	select {
	case <-met:
	case <-time.After(10 * time.Second):
		t.Fatal("two workers never indexed at once")
	}
	ix.Stop()
}
