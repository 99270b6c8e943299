package web

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// The age history: the age of the oldest dead letter waiting, over the
// last day, from the samples the service takes once a minute
// (alert.AgeSampler). One point per quarter of an hour, the largest age
// sampled in it over the queues the token sees; red where some queue was
// past its alarm's max_age. Like the other charts, it is drawn from
// numbers and our own words only: no queue name enters the SVG (the table
// below it names them, as text).

// historySteps is the number of steps of the age history: a day.
const historySteps = 96

// historyRequest is the age history of the day before now: the step
// holding the last microsecond before now (so far) and the 95 before it.
func historyRequest(now time.Time, owners []string) quarantine.AgeHistoryRequest {
	last := now.Add(-time.Microsecond)
	return quarantine.AgeHistoryRequest{Owners: owners, From: last.Add(-(historySteps - 1) * quarantine.AgeHistoryStep), To: last}
}

// hourlyEdges are the edges of the inflow sparklines: whole hours on the
// clock, the last bucket ending at the end of now's minute (so far this
// hour, as GET /api/v1/queues counts its windows), 24 buckets. The store
// reads whole hours and minutes from its kept counts, whatever the
// inflow.
func hourlyEdges(now time.Time) []time.Time {
	end := now.Truncate(time.Minute)
	if end.Before(now) {
		end = end.Add(time.Minute)
	}
	top := end.Truncate(time.Hour)
	n := 24
	if top.Before(end) {
		n = 23
	}
	edges := make([]time.Time, 0, 25)
	for i := n; i >= 0; i-- {
		edges = append(edges, top.Add(-time.Duration(i)*time.Hour))
	}
	if top.Before(end) {
		edges = append(edges, end)
	}
	return edges
}

// point is one sampled bucket of a line chart.
type point struct {
	X, Y  float64
	Class string
	Title string
}

// lineChart is the age history as SVG numbers.
type lineChart struct {
	Width, Height float64 // the whole SVG
	// Plot area.
	Left, Top, PlotW, PlotH, Right float64
	// Lines are the "points" attributes of the polylines, one per run of
	// sampled buckets (a bucket without a sample breaks the line).
	Lines  []string
	Points []point
	YTicks []yTick // grid lines and labels of the age axis
	XTicks []tick
	TickY  float64
	Label  string
	Empty  bool // no sample at all
}

// yTick is a grid line of a line chart's Y axis and its label.
type yTick struct {
	Y    float64
	Text string
}

// historyRow is one hour of the age history's table.
type historyRow struct {
	From, To string // "10:00", "11:00"
	Sampled  bool
	Oldest   string
	Queue    string
	Waiting  int64
	Over     bool
	age      time.Duration
}

// ageHistoryChart draws h, whose last step holds now. maxAge is the
// max_age of a queue's alarm (0: none).
func ageHistoryChart(h quarantine.AgeHistory, now time.Time, maxAge func(queue string) time.Duration) (lineChart, []historyRow) {
	const left, top, plotH, step, bottom = 48, 8, 120, 6, 24
	nb := len(h.Steps)
	// Bucket b is [edges[b], edges[b+1]), the last one up to now.
	edges := append(slices.Clone(h.Steps), now)
	oldest := make([]time.Duration, nb)
	holder := make([]string, nb)
	waiting := make([]int64, nb)
	over := make([]bool, nb)
	var ymax time.Duration
	var sampled int
	for b := range nb {
		if h.Samples[b] > 0 {
			sampled++
		}
		for _, q := range h.Queues {
			if q.Oldest[b] > oldest[b] || holder[b] == "" && q.Oldest[b] > 0 {
				oldest[b], holder[b] = q.Oldest[b], q.Queue
			}
			waiting[b] += q.Waiting[b]
			if m := maxAge(q.Queue); m > 0 && q.Oldest[b] > m {
				over[b] = true
			}
		}
		ymax = max(ymax, oldest[b])
	}
	top1 := niceTop(ymax)
	c := lineChart{Left: left, Top: top, PlotW: float64(nb * step), PlotH: plotH, TickY: top + plotH + 18}
	c.Width, c.Height, c.Right = left+c.PlotW+8, top+plotH+bottom, left+c.PlotW
	c.Empty = sampled == 0
	y := func(d time.Duration) float64 {
		return top + plotH - float64(d)/float64(top1)*plotH
	}
	var run []string
	flush := func() {
		if len(run) > 1 {
			c.Lines = append(c.Lines, strings.Join(run, " "))
		}
		run = nil
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
	for b := range nb {
		if h.Samples[b] == 0 {
			flush()
			continue
		}
		x := left + (float64(b)+0.5)*step
		py := y(oldest[b])
		run = append(run, num(x)+","+num(py))
		p := point{X: x, Y: py, Class: "pt"}
		p.Title = edges[b].UTC().Format("15:04") + "–" + edges[b+1].UTC().Format("15:04") + " UTC: "
		if oldest[b] == 0 {
			p.Title += "nothing waiting"
		} else {
			p.Title += "oldest waiting " + span(oldest[b])
		}
		if over[b] {
			p.Class, p.Title = "pt over", p.Title+", past its alarm's max_age"
		}
		c.Points = append(c.Points, p)
	}
	flush()
	for _, d := range []time.Duration{0, top1 / 2, top1} {
		c.YTicks = append(c.YTicks, yTick{Y: y(d), Text: span(d)})
	}
	for _, hoursAgo := range []int{24, 18, 12, 6, 0} {
		x := left + c.PlotW*float64(24-hoursAgo)/24
		text := "now"
		if hoursAgo > 0 {
			text = strconv.Itoa(hoursAgo) + " h ago"
		}
		t := tick{X: x, Text: text}
		switch hoursAgo {
		case 24:
			t.Anchor = "start"
		case 0:
			t.Anchor = "end"
		}
		c.XTicks = append(c.XTicks, t)
	}
	var most time.Duration
	for _, d := range oldest {
		most = max(most, d)
	}
	if c.Empty {
		c.Label = "Age of the oldest dead letter over the last 24 hours: no sample yet"
	} else {
		c.Label = "Age of the oldest dead letter waiting over the last 24 hours, one point per 15 minutes: at most " + span(most)
	}

	// The table: one row per clock hour, the largest of its buckets.
	var rows []historyRow
	for b := range nb {
		from := edges[b].UTC().Truncate(time.Hour)
		if len(rows) == 0 || rows[len(rows)-1].From != from.Format("15:04") {
			to := from.Add(time.Hour)
			if to.After(edges[nb]) {
				to = edges[nb]
			}
			rows = append(rows, historyRow{From: from.Format("15:04"), To: to.UTC().Format("15:04")})
		}
		r := &rows[len(rows)-1]
		if h.Samples[b] == 0 {
			continue
		}
		r.Sampled = true
		if oldest[b] > r.age {
			r.age, r.Oldest, r.Queue = oldest[b], span(oldest[b]), holder[b]
		}
		r.Waiting = max(r.Waiting, waiting[b])
		r.Over = r.Over || over[b]
	}
	return c, rows
}

// niceTop is the top of the age axis for ages up to d: the first of a
// few round durations at or above d.
func niceTop(d time.Duration) time.Duration {
	const day = 24 * time.Hour
	for _, t := range []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
		8 * time.Hour, 12 * time.Hour, day, 2 * day, 4 * day, 8 * day, 16 * day, 32 * day} {
		if d <= t {
			return t
		}
	}
	return (d + day - 1) / day * day
}

// span is a duration as the pages show an age: "45 s", "12 min",
// "3 h 20 min", "4 d 6 h".
func span(d time.Duration) string {
	const day = 24 * time.Hour
	itoa := func(d, unit time.Duration) string { return strconv.FormatInt(int64(d/unit), 10) }
	switch {
	case d <= 0:
		return "0"
	case d < time.Minute:
		return itoa(d, time.Second) + " s"
	case d < time.Hour:
		return itoa(d, time.Minute) + " min"
	case d < 2*day:
		if m := d % time.Hour / time.Minute; m > 0 {
			return itoa(d, time.Hour) + " h " + strconv.FormatInt(int64(m), 10) + " min"
		}
		return itoa(d, time.Hour) + " h"
	default:
		if h := d % day / time.Hour; h > 0 {
			return itoa(d, day) + " d " + strconv.FormatInt(int64(h), 10) + " h"
		}
		return itoa(d, day) + " d"
	}
}
