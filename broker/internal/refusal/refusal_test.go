package refusal

import (
	"context"
	"errors"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

var errTimeout = errors.New("timeout")

func timedOut(err error) bool { return errors.Is(err, errTimeout) }

func results() []replay.Result {
	return []replay.Result{
		{Outcome: quarantine.ItemPending, Err: errTimeout},
		{Outcome: quarantine.ItemPending, Err: errors.New("unreachable")},
		{Outcome: quarantine.ItemFailed, Err: errTimeout},
		{Outcome: quarantine.ItemPublished},
	}
}

func TestRefused(t *testing.T) {
	t.Parallel()
	var c Counter
	mark := c.Mark()
	res := results()
	c.Refused(context.Background(), mark, res, timedOut)
	for i, r := range res {
		if r.Refused {
			t.Errorf("no answer: result %d refused", i)
		}
	}
	c.Add()
	res = results()
	c.Refused(context.Background(), mark, res, timedOut)
	for i, r := range res {
		if r.Refused != (i == 0) {
			t.Errorf("answered: result %d refused %v", i, r.Refused)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = results()
	c.Refused(ctx, mark, res, timedOut)
	if res[0].Refused {
		t.Error("a publish whose context ended: refused")
	}
}
