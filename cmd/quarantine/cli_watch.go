package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	apiclient "github.com/quarantine-dev/quarantine/client"
)

// errReplayEnded is returned by replay watch when the batch ends other
// than completed (failed, cancelled, expired).
var errReplayEnded = errors.New("the replay did not complete")

func (c *cliRun) replayWatch(ctx context.Context) error {
	return c.watch(ctx, c.o.args[0])
}

// watch follows a batch until it ends: on a terminal, one line redrawn
// in place (a bar, the rate and the ETA); otherwise a plain line at each
// change of state or counts; with --output json, the batch as one JSON
// line at each change. It returns nil when the batch completed and an
// errReplayEnded error when it failed, was cancelled or expired. Paused
// and halted batches are waited on (they may be resumed); interrupting
// the command leaves the batch as it is.
func (c *cliRun) watch(ctx context.Context, id string) error {
	width, tty := c.m.terminalWidth(c.out)
	tty = tty && !c.json()
	tick := time.NewTicker(c.o.interval)
	defer tick.Stop()
	last := ""
	for {
		res, err := c.api.GetReplayWithResponse(ctx, id)
		if err != nil {
			if tty {
				fmt.Fprintln(c.out)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("stopped watching replay %s; it goes on", id)
			}
			return err
		}
		b := res.JSON200
		key := fmt.Sprint(b.State, b.StateReason, b.Counts, b.CanaryVerdict)
		switch {
		case tty:
			fmt.Fprintf(c.out, "\r\x1b[2K%s", progressLine(b, width))
		case key == last:
		case c.json():
			var line bytes.Buffer
			if err := json.Compact(&line, res.Body); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%s\n", line.Bytes())
		default:
			fmt.Fprintf(c.out, "%s\n", progressLine(b, 0))
		}
		last = key
		if quarantine.ReplayState(b.State).Terminal() {
			if tty {
				fmt.Fprintln(c.out)
			}
			return c.ended(b)
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(c.out)
			}
			return fmt.Errorf("stopped watching replay %s; it goes on (%s)", id, b.State)
		case <-tick.C:
		}
	}
}

// ended writes how the batch ended (not in JSON: the last line said it)
// and returns nil when it completed.
func (c *cliRun) ended(b *apiclient.ReplayBatch) error {
	n := b.Counts
	took := ""
	if b.StartedAt != nil && b.FinishedAt != nil {
		took = " in " + b.FinishedAt.Sub(*b.StartedAt).Round(10*time.Millisecond).String()
	}
	if !c.json() {
		fmt.Fprintf(c.out, "replay %s %s%s: %d published, %d deduplicated, %d skipped, %d failed, %d refailed%s\n",
			b.Id, b.State, took, n.Published, n.Deduplicated, n.Skipped, n.Failed, n.Refailed, reasonSuffix(b.StateReason))
	}
	if b.State == apiclient.ReplayState(quarantine.ReplayCompleted) {
		return nil
	}
	return fmt.Errorf("%w: replay %s ended %s%s", errReplayEnded, b.Id, b.State, reasonSuffix(b.StateReason))
}

// progress is a batch's progress in words: done of total, the rate and
// the time left.
func progress(b *apiclient.ReplayBatch) string {
	done := b.Total - b.Counts.Pending
	pct := 100
	if b.Total > 0 {
		pct = done * 100 / b.Total
	}
	s := fmt.Sprintf("%d/%d %3d%%", done, b.Total, pct)
	if b.AchievedRate != nil {
		s += fmt.Sprintf("  %.1f msg/s", *b.AchievedRate)
	}
	if b.EtaSeconds != nil {
		s += "  ETA " + seconds(float64(*b.EtaSeconds))
	}
	if bad := b.Counts.Failed + b.Counts.Refailed; bad > 0 {
		s += fmt.Sprintf("  %d FAILED", bad)
	}
	if b.CanaryVerdict != "" {
		s += "  canary " + string(b.CanaryVerdict)
	}
	return s
}

// progressLine is one line of replay watch: the state, a bar when width
// is a terminal's width (0: no bar, for logs), the progress, and why it
// is paused or halted.
func progressLine(b *apiclient.ReplayBatch, width int) string {
	text := progress(b)
	head := string(b.State)
	tail := reasonSuffix(b.StateReason)
	if width == 0 {
		n := b.Counts
		return fmt.Sprintf("%s %s  published=%d deduplicated=%d skipped=%d failed=%d refailed=%d%s",
			head, text, n.Published, n.Deduplicated, n.Skipped, n.Failed, n.Refailed, tail)
	}
	barWidth := min(40, width-len(head)-len(text)-6)
	line := head + "  " + text
	if barWidth >= 10 {
		done := b.Total - b.Counts.Pending
		filled := barWidth
		if b.Total > 0 {
			filled = done * barWidth / b.Total
		}
		line = fmt.Sprintf("%s [%s%s] %s", head, strings.Repeat("█", filled), strings.Repeat("░", barWidth-filled), text)
	}
	line += tail
	return clip(line, width-1)
}
