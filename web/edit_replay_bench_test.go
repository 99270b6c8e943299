package web_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

// BenchmarkEditReplayPages measures the editor and the replay pages (see
// BenchmarkPages for what is measured and how). The replay pages are a
// draft of 500 messages (cancelled at the end), created by the actor of
// tok.
func BenchmarkEditReplayPages(b *testing.B) {
	s, rows := openBench(b)
	ctx := context.Background()
	h, err := web.New(web.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	bs := loginBench(b, s, h)
	tok := &quarantine.Token{Name: "bench-replayer", Role: quarantine.RoleAdmin}

	page, err := s.ListMessages(ctx, quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 500})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for _, m := range page.Messages {
		ids = append(ids, m.ID)
	}
	draft, err := s.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: 10, DryRun: true, Reason: "bench",
		Actor: tok.Actor(), ForceWithoutKey: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = s.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: draft.ID, Action: quarantine.ReplayActCancel, Actor: tok.Actor(), Reason: "bench done"})
	})
	id := ids[len(ids)/2]
	byIDs := url.Values{"ids": ids[:50]}.Encode()
	queue := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 1}
	pages := []benchPage{
		{"edit", "/messages/" + id + "/edit", func(ctx context.Context) error {
			_, err := s.GetMessage(ctx, id)
			return err
		}},
		{"replay-new-ids", "/replays/new?" + byIDs, func(ctx context.Context) error {
			for _, id := range ids[:50] {
				if _, err := s.GetMessage(ctx, id); err != nil {
					return err
				}
			}
			return nil
		}},
		{"replay-new-filter", "/replays/new?queue=queue-03&status=quarantined", func(ctx context.Context) error {
			_, err := s.CountByQueue(ctx, queue)
			return err
		}},
		{"replays", "/replays", func(ctx context.Context) error {
			_, _, err := s.ListReplays(ctx, quarantine.ReplayFilter{Limit: 50})
			return err
		}},
		{"replay", "/replays/" + draft.ID, func(ctx context.Context) error {
			if _, err := s.GetReplay(ctx, draft.ID); err != nil {
				return err
			}
			items, _, err := s.ListReplayItems(ctx, quarantine.ReplayItemFilter{BatchID: draft.ID, After: -1, Limit: 50})
			for _, it := range items {
				if _, err := s.GetMessage(ctx, it.MessageID); err != nil {
					return err
				}
			}
			return err
		}},
		{"replay-progress", "/replays/" + draft.ID + "/progress", func(ctx context.Context) error {
			_, err := s.GetReplay(ctx, draft.ID)
			return err
		}},
	}
	measurePages(b, bs, fmt.Sprintf("%d messages", rows), benchCalls(b), pages)
}
