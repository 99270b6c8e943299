package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

// BenchmarkMessageViews measures the pages of the messages area (see
// BenchmarkPages for what is measured and how):
//
//   - list: /messages (ListMessages, limit 50);
//   - qlist: /messages?queue=queue-03&status=quarantined;
//   - deep: a page about 90% into the order (by its cursor);
//   - groups: /groups (Groups, limit 50);
//   - message: /messages/{id} (GetMessage; the page adds versions,
//     replays and audit);
//   - sample: /messages/sample?size=10 (Sample);
//   - allcount: /messages/bulk?all=1&queue=queue-03 (CountByQueue).
func BenchmarkMessageViews(b *testing.B) {
	st, rows := openBench(b)
	ctx := context.Background()
	h, err := web.New(web.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginDelay: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	bs := loginBench(b, st, h)
	id := fmt.Sprintf("0%025X", rows/3+11) // a seeded message (see pgseed)
	ms, err := st.Sample(ctx, quarantine.SampleRequest{Size: quarantine.MaxSample, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(ms, func(x, y *quarantine.Message) int { return x.FailedAt.Compare(y.FailedAt) })
	deep := quarantine.CursorOf(ms[len(ms)/10])
	q3 := quarantine.Filter{Queue: []string{"queue-03"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Limit: 50}
	pages := []benchPage{
		{"list", "/messages", func(ctx context.Context) error {
			_, err := st.ListMessages(ctx, quarantine.Filter{Limit: 50})
			return err
		}},
		{"qlist", "/messages?queue=queue-03&status=quarantined", func(ctx context.Context) error { _, err := st.ListMessages(ctx, q3); return err }},
		{"deep", "/messages?cursor=" + deep.Encode(), func(ctx context.Context) error {
			_, err := st.ListMessages(ctx, quarantine.Filter{After: deep, Limit: 50})
			return err
		}},
		{"groups", "/groups", func(ctx context.Context) error {
			_, err := st.Groups(ctx, quarantine.Filter{Limit: quarantine.DefaultLimit})
			return err
		}},
		{"message", "/messages/" + id, func(ctx context.Context) error { _, err := st.GetMessage(ctx, id); return err }},
		{"sample", "/messages/sample?size=10", func(ctx context.Context) error {
			_, err := st.Sample(ctx, quarantine.SampleRequest{Size: 10, Seed: time.Now().UnixNano()})
			return err
		}},
		{"allcount", "/messages/bulk?all=1&queue=queue-03", func(ctx context.Context) error {
			_, err := st.CountByQueue(ctx, quarantine.Filter{Queue: []string{"queue-03"}})
			return err
		}},
	}
	measurePages(b, bs, fmt.Sprintf("%d messages", rows), benchCalls(b), pages)
}
