package web_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
	"github.com/quarantine-dev/quarantine/web"
)

// layoutProblems is run on a page: it returns what a reader at 3 a.m.
// would trip on, as text. The page must not scroll sideways; an id, a
// number, a time or a badge is on one line; no word of a table cell is
// broken across lines (in prose cells, words up to 24 characters: a
// longer token, a URL say, may break there rather than widen the
// table); the tick labels of a chart are at least 6 px apart.
const layoutProblems = `(() => {
  const out = [];
  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth) out.push("the page scrolls sideways: " + de.scrollWidth + " > " + de.clientWidth);
  const lines = rects => new Set([...rects].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
  document.querySelectorAll("main code.id, main td.num, main td time, main .badge").forEach(el => {
    if (lines(el.getClientRects()) > 1) out.push("wraps: " + el.tagName + "." + el.className + " " + JSON.stringify(el.textContent));
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth) out.push("overflows its box: " + JSON.stringify(el.textContent));
  });
  document.querySelectorAll("main td").forEach(td => {
    const prose = td.matches(".reason");
    const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.parentElement.closest("pre, [hidden]")) continue;
      for (const m of n.data.matchAll(/\S+/g)) {
        if (prose && m[0].length > 24) continue;
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        if (lines(r.getClientRects()) > 1) out.push("a word broken in a cell: " + JSON.stringify(m[0]));
      }
    }
  });
  document.querySelectorAll("main svg").forEach(svg => {
    const ticks = [...svg.querySelectorAll("text.tick")].map(t => ({t: t.textContent, b: t.getBBox()}));
    for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++) {
      const a = ticks[i].b, b = ticks[j].b;
      const gap = 6; // labels that touch read as one ("30–60 min15–30 min")
      if (a.x < b.x + b.width + gap && b.x < a.x + a.width + gap && a.y < b.y + b.height && b.y < a.y + a.height)
        out.push("chart labels overlap or touch: " + JSON.stringify(ticks[i].t) + " and " + JSON.stringify(ticks[j].t));
    }
  });
  return JSON.stringify(out);
})()`

// aboveTheFold returns, for each selector, whether the element's top is
// within the viewport and it shows at least min pixels (or all of it).
const aboveTheFold = `((sels, min) => JSON.stringify(sels.map(s => {
  const el = document.querySelector(s);
  if (!el) return s + ": missing";
  const r = el.getBoundingClientRect();
  return r.top >= 0 && innerHeight - r.top >= Math.min(min, r.height) ? "" : s + ": top " + Math.round(r.top) + " of a viewport of " + innerHeight;
}).filter(Boolean)))`

// layoutFixture fills a UI with what an incident looks like: long job and
// queue names, keys, reasons with URLs, JSON payloads, a replay that ran,
// one to preview, edits and discards in the audit log.
type layoutFixture struct {
	e              *env
	secret         string
	message        *quarantine.Message
	ran, draft     *quarantine.ReplayBatch
	selection, ids string
}

func newLayoutFixture(t *testing.T) *layoutFixture {
	t.Helper()
	e := newEnv(t, func(c *web.Config) {
		c.Alarms = []alert.Rule{{Name: "payments-age", Queues: []string{"payments.*"}, MaxAge: time.Hour, Receivers: []string{"x"}}}
	})
	ctx := context.Background()
	f := &layoutFixture{e: e, secret: e.token("oncall", quarantine.RoleAdmin)}
	now := time.Now()
	jobs := []struct {
		queue, job string
		class      quarantine.FailureClass
		reason     string
	}{
		{"payments.charge_card", "charge_card", quarantine.ClassPermanent,
			"card_declined: the issuer refused the charge (https://payments.example.com/v1/charges/ch_3PZkLm2eZvKYlo2C1a8b9c0d returned 402, decline_code=insufficient_funds)"},
		{"payments.charge_card", "token.create", quarantine.ClassRejected, "upstream timeout after 30s calling tokenizer.internal:8443"},
		{"notifications.email", "send_receipt_email", quarantine.ClassExhausted, "SMTP 451 4.7.1 try again later (attempt 12 of 12)"},
		{"billing-events", "invoice.finalize", quarantine.ClassPermanent, "schema: /lines/0/amount must be a number"},
	}
	var all []*quarantine.Message
	for i := range 24 {
		j := jobs[i%len(jobs)]
		payload := fmt.Sprintf(`{"order_id":"ord_%06d","customer":{"id":"cus_%08d","email":"buyer%d@example.com"},"amount":{"value":%d.50,"currency":"EUR"},"lines":[{"sku":"SKU-%04d","qty":%d}]}`,
			1000+i, 4200+i, i, 10+i, i, 1+i%3)
		all = append(all, e.message(quarantine.Message{Queue: j.queue, JobName: j.job, FailureClass: j.class,
			Reason: j.reason, IdempotencyKey: fmt.Sprintf("order:2026-12-02:%06d", 1000+i), Attempts: 1 + i%5,
			FailedAt: now.Add(-time.Duration(i*i) * 7 * time.Minute), Payload: []byte(payload),
			Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-retry-count": "12"}}))
	}
	f.message = all[0]
	if _, err := e.store.EditPayload(ctx, quarantine.PayloadEdit{MessageID: all[4].ID, IfMatch: all[4].PayloadSHA256,
		Payload: []byte(strings.Replace(string(all[4].Payload), `"qty":2`, `"qty":1`, 1)), Reason: "one line was a duplicate", Actor: "token:oncall"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Discard(ctx, quarantine.Discard{IDs: []string{all[3].ID, all[7].ID}, Reason: "test orders from the staging shop", Actor: "token:oncall"}); err != nil {
		t.Fatal(err)
	}
	f.ran = e.replayed(all[8], "tokenizer fixed in 4.2.1")
	var err error
	f.draft, err = e.store.CreateReplay(ctx, quarantine.ReplayRequest{IDs: []string{all[0].ID, all[4].ID, all[12].ID, all[16].ID},
		Rate: 20, Canary: 1, Observe: time.Minute, DryRun: true, Reason: "card network recovered", Actor: "token:oncall", DraftTTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SampleAges(ctx, now); err != nil {
		t.Fatal(err)
	}
	f.ids = "ids=" + all[0].ID + "&ids=" + all[4].ID + "&ids=" + all[12].ID
	return f
}

// layoutPages are the main pages, as their screenshots in docs/images
// are named.
func (f *layoutFixture) layoutPages() []struct{ name, path string } {
	return []struct{ name, path string }{
		{"overview", "/overview"},
		{"messages", "/messages"},
		{"message", "/messages/" + f.message.ID},
		{"edit", "/messages/" + f.message.ID + "/edit"},
		{"groups", "/groups"},
		{"bulk", "/messages/bulk?" + f.ids},
		{"replay-new", "/replays/new?" + f.ids},
		{"replay-preview", "/replays/" + f.draft.ID},
		{"replay", "/replays/" + f.ran.ID},
		{"replays", "/replays"},
		{"audit", "/audit"},
	}
}

// At 1366x768 and 1920x1080 no main page scrolls sideways, breaks an
// id, a number or a word, or overlaps its chart labels; a message's
// reason, payload and actions are in the first screen. With
// QUARANTINE_DOCS_SCREENSHOTS=1 it writes the screenshots of
// docs/web-ui.md (docs/images/ui-*.png, at 1366x768).
func TestUIBrowserLayout(t *testing.T) {
	b := browsertest.New(t)
	f := newLayoutFixture(t)
	b.Do(chromedp.Navigate(f.e.srv.URL+"/?token="+f.secret), chromedp.WaitVisible(chromedp.ID("logout")))
	docs := os.Getenv("QUARANTINE_DOCS_SCREENSHOTS") == "1"
	for _, vp := range []struct{ w, h int64 }{{1366, 768}, {1920, 1080}} {
		b.Do(chromedp.EmulateViewport(vp.w, vp.h))
		for _, p := range f.layoutPages() {
			b.Do(chromedp.Navigate(f.e.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS("main h1")))
			if h1 := b.Text("main h1"); h1 == "Not found" || h1 == "Error" || h1 == "Refused" {
				t.Fatalf("%s (%s) is an error page", p.name, p.path)
			}
			var problems []string
			if err := json.Unmarshal([]byte(b.Eval(layoutProblems)), &problems); err != nil {
				t.Fatal(err)
			}
			for _, pr := range problems {
				t.Errorf("%dx%d %s: %s", vp.w, vp.h, p.name, pr)
			}
			if p.name == "message" {
				var low []string
				js := aboveTheFold + `(["#reason", "#payload", "#replay", "#edit"], 120)`
				if err := json.Unmarshal([]byte(b.Eval(js)), &low); err != nil {
					t.Fatal(err)
				}
				for _, l := range low {
					t.Errorf("%dx%d message: the decision is below the fold: %s", vp.w, vp.h, l)
				}
			}
			shot := func(name string) {
				if docs && vp.w == 1366 {
					shot := smallPNG(t, browsertest.Run(b, chromedp.CaptureScreenshot()))
					if err := os.WriteFile(filepath.Join(browsertest.Root(t), "docs", "images", "ui-"+name+".png"), shot, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			shot(p.name)
			if p.name == "edit" {
				// The live diff of a compacted payload with one value
				// changed: one change by JSON Pointer, not every line.
				b.Do(chromedp.Evaluate[chromedp.Void](`(() => { const a = document.getElementById("payload");
					const v = JSON.parse(a.value); v.amount.value = 9.5; v.lines.push({sku: "SKU-9999", qty: 1});
					a.value = JSON.stringify(v); a.dispatchEvent(new Event("input")); })()`))
				b.WaitFor(`document.querySelectorAll("#changes tbody tr").length === 2`)
				if got := b.Eval(`JSON.stringify([...document.querySelectorAll("#changes tbody tr")].map(r => r.cells[0].textContent + " " + r.cells[1].textContent))`); got != `["/amount/value changed","/lines/1 added"]` {
					t.Errorf("%dx%d edit: the live diff of a compacted payload is %s", vp.w, vp.h, got)
				}
				if err := json.Unmarshal([]byte(b.Eval(layoutProblems)), &problems); err != nil {
					t.Fatal(err)
				}
				for _, pr := range problems {
					t.Errorf("%dx%d edit with its diff: %s", vp.w, vp.h, pr)
				}
				b.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("reason").scrollIntoView({block: "start"})`))
				shot("edit-diff")
			}
		}
	}
	b.NoConsole()
}

// smallPNG re-encodes a screenshot with a palette of its 256 most
// frequent colours (a page is mostly flat colours and their
// anti-aliasing), each pixel the nearest of them, best compressed.
func smallPNG(t *testing.T, b []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[color.RGBA]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	colors := slices.SortedFunc(maps.Keys(counts), func(a, b color.RGBA) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(uint32(a.R)<<16|uint32(a.G)<<8|uint32(a.B), uint32(b.R)<<16|uint32(b.G)<<8|uint32(b.B))
	})
	pal := make(color.Palette, 0, 256)
	for _, c := range colors[:min(len(colors), 256)] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(bounds, pal)
	draw.Draw(out, bounds, img, bounds.Min, draw.Src)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A running replay's page updates its per-message table as items get
// their outcomes, without reloading (the state has not changed).
func TestUIBrowserReplayItemsFollowTheRun(t *testing.T) {
	b := browsertest.New(t)
	e := newEnv(t)
	secret := e.token("op", quarantine.RoleOperator)
	ctx := context.Background()
	var ids []string
	for i := range 2 {
		ids = append(ids, e.message(quarantine.Message{Queue: "orders", JobName: "charge", IdempotencyKey: fmt.Sprintf("order:%d", i),
			Payload: []byte(`{}`), Reason: "declined"}).ID)
	}
	batch, err := e.store.CreateReplay(ctx, quarantine.ReplayRequest{IDs: ids, Rate: 10, Reason: "fixed", Actor: "token:op"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Do(chromedp.Navigate(e.srv.URL+"/?token="+secret), chromedp.WaitVisible(chromedp.ID("logout")))
	b.Do(chromedp.Navigate(e.srv.URL+"/replays/"+batch.ID), chromedp.WaitVisible(chromedp.ID("replay-items")))
	outcomes := `JSON.stringify([...document.querySelectorAll("#replay-items tbody tr")].map(r => r.querySelector("td.outcome").textContent.trim()))`
	if got := b.Eval(outcomes); got != `["pending","pending"]` {
		t.Fatalf("the items start as %s", got)
	}
	b.Do(chromedp.Evaluate[chromedp.Void](`window.samePage = true`))
	ls, err := e.store.LeaseReplayItems(ctx, batch.ID, "engine", 1, time.Minute, 0)
	if err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	if _, err := e.store.RecordReplayResults(ctx, []quarantine.ReplayResult{{BatchID: batch.ID, MessageID: ls[0].Item.MessageID, Fence: ls[0].Fence,
		Outcome: quarantine.ItemPublished, Destination: "memory:test/orders", PayloadVersion: ls[0].Message.PayloadVersion,
		PayloadSHA256: ls[0].Message.PayloadSHA256, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(`document.querySelector('#replay-items tr[data-message="` + ls[0].Item.MessageID + `"] td.outcome').textContent.trim() === "published"`)
	if b.Eval(`String(window.samePage)`) != "true" {
		t.Fatal("the page reloaded: the table must follow the run in place")
	}
	if got := b.Text("#replay-done"); got != "1" {
		t.Fatalf("done shows %q, want 1", got)
	}
	// The rows read again keep their copy buttons working.
	if n := browsertest.Run(b, chromedp.Evaluate[int](`document.querySelectorAll("#replay-items button.copy:not([hidden])").length`)); n != 2 {
		t.Fatalf("%d copy buttons shown in the refreshed rows, want 2", n)
	}
	b.NoConsole()
}
