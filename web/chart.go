package web

import (
	"strconv"
	"time"
)

// Charts are SVG drawn by the templates from the numbers computed here:
// coordinates, sizes and counts. No stored string reaches an SVG but
// through html/template's escaping of a <title> or an attribute, and the
// charts name no queue at all: they need no script to be read.

// bar is one bar of a chart, in the SVG's user units.
type bar struct {
	X, Y, W, H float64
	N          int64
	// Title is the bar's tooltip and accessible text ("10:00–11:00 UTC:
	// 12 collected"), made of our words and numbers.
	Title string
	Class string
	// Count is the count shown above the bar (the age chart), centred
	// at CountX, CountY.
	Count          string
	CountX, CountY float64
}

// barChart is a chart of bars over a baseline at Height.
type barChart struct {
	Width, Height float64
	Bars          []bar
	Max           int64 // the tallest bar's count
	Total         int64
	// Label is the chart's accessible name (aria-label).
	Label string
	// Ticks are labels under the bars (the age chart's buckets), at
	// TickY; FullHeight makes room for them and the counts above.
	Ticks      []tick
	TickY      float64
	FullHeight float64
}

type tick struct {
	X    float64
	Text string
	// Anchor is the label's text-anchor when not "middle".
	Anchor string
}

// bars lays counts out as bars of width w with gap between them, scaled
// so that the largest is h tall; a non-zero count is at least 1 unit tall
// so that it shows.
func bars(counts []int64, w, gap, h float64) ([]bar, int64, int64) {
	var mx, total int64
	for _, n := range counts {
		mx = max(mx, n)
		total += n
	}
	out := make([]bar, len(counts))
	for i, n := range counts {
		bh := 0.0
		if mx > 0 && n > 0 {
			bh = max(float64(n)/float64(mx)*h, 1)
		}
		out[i] = bar{X: float64(i) * (w + gap), Y: h - bh, W: w, H: bh, N: n}
	}
	return out, mx, total
}

// sparkline is the 24-hour inflow of one queue: one bar per bucket of
// edges (hourlyEdges: clock hours, the last one so far this hour, to the
// end of the current minute).
func sparkline(counts []int64, edges []time.Time) barChart {
	const w, gap, h = 4, 1, 20
	bs, mx, total := bars(counts, w, gap, h)
	for i := range bs {
		from, to := edges[i].UTC(), edges[i+1].UTC()
		bs[i].Title = from.Format("15:04") + "–" + to.Format("15:04") + " UTC: " + strconv.FormatInt(bs[i].N, 10) + " collected"
	}
	return barChart{Width: float64(len(bs))*(w+gap) - gap, Height: h, Bars: bs, Max: mx, Total: total,
		Label: "Inflow over the last 24 hours, one bar per clock hour: " + strconv.FormatInt(total, 10) +
			" collected, at most " + strconv.FormatInt(mx, 10) + " in an hour"}
}

// ageBucket is one bucket of the age chart: the messages waiting whose
// age is in [From, To) (To 0: no upper bound).
type ageBucket struct {
	From, To time.Duration
	Text     string
}

// ageBuckets are the buckets of the age chart, oldest first. The first,
// older than a day, is what the other buckets leave of the queue's
// quarantined count (kept by the store): the chart counts exactly only the
// last day's dead letters, so that its cost grows with them, not with
// everything the quarantine holds.
var ageBuckets = []ageBucket{
	{24 * time.Hour, 0, "> 1 d"},
	{12 * time.Hour, 24 * time.Hour, "12–24 h"},
	{6 * time.Hour, 12 * time.Hour, "6–12 h"},
	{3 * time.Hour, 6 * time.Hour, "3–6 h"},
	{time.Hour, 3 * time.Hour, "1–3 h"},
	{30 * time.Minute, time.Hour, "30–60 min"},
	{15 * time.Minute, 30 * time.Minute, "15–30 min"},
	{5 * time.Minute, 15 * time.Minute, "5–15 min"},
	{0, 5 * time.Minute, "< 5 min"},
}

// ageEdges are the failed_at edges of ageBuckets[1:], ascending, from a
// day ago to the end of now's minute (ageEnd): histogram bucket i is
// ageBuckets[i+1], the ages in [From, To) counted in whole minutes, which
// the store reads from its per-minute counts of the waiting ones however
// many wait.
func ageEdges(now time.Time) []time.Time {
	end := ageEnd(now)
	var edges []time.Time
	for _, b := range ageBuckets[1:] {
		edges = append(edges, end.Add(-b.To))
	}
	return append(edges, end)
}

// ageEnd is the end of the minute holding now (now on a whole minute):
// the age chart's ages are counted from it.
func ageEnd(now time.Time) time.Time {
	end := now.Truncate(time.Minute)
	if end.Before(now) {
		end = end.Add(time.Minute)
	}
	return end
}

// ageRow is one line of the age chart's table.
type ageRow struct {
	Text string
	N    int64
	Over int64 // of N, in a queue whose age alarm this bucket's age exceeds
}

// ageChart draws counts (one per ageBuckets entry) as bars, each split
// into the part older than its queue's max_age (over) and the rest.
func ageChart(counts, over []int64) (barChart, []ageRow) {
	// 78 units a bucket: room for the widest tick label ("30–60 min" at 11px)
	const w, gap, h, top, pad = 60, 18, 120, 16, 8
	bs, mx, total := bars(counts, w, gap, h)
	c := barChart{Width: float64(len(bs))*(w+gap) - gap + 2*pad, Height: top + h, Max: mx, Total: total,
		TickY: top + h + 14, FullHeight: top + h + 20}
	rows := make([]ageRow, len(bs))
	for i, b := range bs {
		b.X += pad
		b.Y += top
		b.Title = ageBuckets[i].Text + ": " + strconv.FormatInt(b.N, 10) + " waiting"
		if over[i] > 0 {
			b.Title += ", " + strconv.FormatInt(over[i], 10) + " past their alarm's max_age"
		}
		b.Class = "age-bar"
		b.Count, b.CountX, b.CountY = strconv.FormatInt(b.N, 10), b.X+w/2, b.Y-3
		c.Bars = append(c.Bars, b)
		if over[i] > 0 && b.N > 0 {
			oh := b.H * float64(over[i]) / float64(b.N)
			c.Bars = append(c.Bars, bar{X: b.X, Y: b.Y, W: w, H: oh, N: over[i], Title: b.Title, Class: "age-bar age-over"})
		}
		c.Ticks = append(c.Ticks, tick{X: b.X + w/2, Text: ageBuckets[i].Text})
		rows[i] = ageRow{Text: ageBuckets[i].Text, N: b.N, Over: over[i]}
	}
	c.Label = "Age of the " + strconv.FormatInt(total, 10) + " dead letters waiting, oldest on the left"
	return c, rows
}
