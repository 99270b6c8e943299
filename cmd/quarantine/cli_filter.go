package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	apiclient "github.com/quarantine-dev/quarantine/client"
)

// filterFlags are the message filters, one flag per query parameter of
// GET /api/v1/messages, named like it.
type filterFlags struct {
	queue, jobName, owner, source, idempotencyKey, fingerprint stringList
	failureClass, status                                       csvList
	failedAfter, failedBefore                                  timeFlag
	olderThan, q                                               string
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.queue, "queue", "messages of this `queue` (repeatable: any of them)")
	fs.Var(&f.jobName, "job_name", "messages of this job `name` (repeatable)")
	fs.Var(&f.failureClass, "failure_class", "failure `class`es, comma-separated or repeated: "+joinOf(quarantine.FailureClasses))
	fs.Var(&f.status, "status", "`status`es, comma-separated or repeated: "+joinOf(quarantine.Statuses))
	fs.Var(&f.owner, "owner", "messages of this owning `team` (repeatable)")
	fs.Var(&f.source, "source", "messages from this `collector` (repeatable; http for ingest)")
	fs.Var(&f.idempotencyKey, "idempotency_key", "messages with this idempotency `key` (repeatable)")
	fs.Var(&f.fingerprint, "fingerprint", "messages of this failure `group` (repeatable)")
	fs.Var(&f.failedAfter, "failed_after", "messages that failed at or after this `time` (RFC 3339)")
	fs.Var(&f.failedBefore, "failed_before", "messages that failed before this `time` (RFC 3339)")
	fs.StringVar(&f.olderThan, "older_than", "", "messages that failed more than this `long` ago: 90s, 15m, 2h, 7d")
	fs.StringVar(&f.q, "q", "", "messages whose reason, job name or payload contains this `text`")
}

// given tells whether any filter was given.
func (f *filterFlags) given() bool {
	return f.filter() != apiclient.MessageFilter{}
}

// filter is the filter as the API's MessageFilter.
func (f *filterFlags) filter() apiclient.MessageFilter {
	var mf apiclient.MessageFilter
	list := func(l []string) *[]string {
		if len(l) == 0 {
			return nil
		}
		return &l
	}
	mf.Queue, mf.JobName, mf.Owner = list(f.queue), list(f.jobName), list(f.owner)
	mf.Source, mf.IdempotencyKey, mf.Fingerprint = list(f.source), list(f.idempotencyKey), list(f.fingerprint)
	if len(f.failureClass) > 0 {
		classes := make([]apiclient.FailureClass, len(f.failureClass))
		for i, c := range f.failureClass {
			classes[i] = apiclient.FailureClass(c)
		}
		mf.FailureClass = &classes
	}
	if len(f.status) > 0 {
		statuses := make([]apiclient.MessageStatus, len(f.status))
		for i, s := range f.status {
			statuses[i] = apiclient.MessageStatus(s)
		}
		mf.Status = &statuses
	}
	mf.FailedAfter, mf.FailedBefore = f.failedAfter.t, f.failedBefore.t
	if f.olderThan != "" {
		mf.OlderThan = &f.olderThan
	}
	if f.q != "" {
		mf.Q = &f.q
	}
	return mf
}

// params turns the filter into the query parameters of a list (they carry
// the same names as the MessageFilter members).
func params[P any](mf apiclient.MessageFilter) (*P, error) {
	b, err := json.Marshal(mf)
	if err != nil {
		return nil, err
	}
	p := new(P)
	return p, json.Unmarshal(b, p)
}

// csvList is a repeatable flag whose values may also be comma-separated.
type csvList []string

func (l *csvList) String() string { return strings.Join(*l, ",") }

func (l *csvList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// timeFlag is an RFC 3339 time.
type timeFlag struct{ t *time.Time }

func (f *timeFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(v string) error {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time like 2026-12-01T09:00:00Z", v)
	}
	f.t = &t
	return nil
}

// joinOf lists values for a flag's help.
func joinOf[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// replayFlags are the members of a replay request, beside its messages.
type replayFlags struct {
	rate, haltRefailRatio             float64
	burst, canary                     int
	observe, destQueue, destCollector string
	force, forceWithoutKey            bool
	acceptKeyRuleChange, dryRun       bool
}

func createFlags(fs *flag.FlagSet, o *cliOptions) {
	o.filter.register(fs)
	r := &o.replay
	reasonFlag(fs, o)
	fs.Float64Var(&r.rate, "rate", 0, "messages per `second` (default: the server's replay.rate)")
	fs.IntVar(&r.burst, "burst", 0, "messages the batch may publish at once (default: max(1, rate/10), at most 10000)")
	fs.IntVar(&r.canary, "canary", 0, "publish this `many` first and observe them (default: the server's replay.canary)")
	fs.StringVar(&r.observe, "observe", "", "how long the canary is watched for re-failures, like 30s (default: the server's)")
	fs.Float64Var(&r.haltRefailRatio, "halt-refail-ratio", 0, "pause when refailed/published passes this `ratio` (0 to 1; 0 disables)")
	fs.StringVar(&r.destQueue, "destination-queue", "", "publish to this `queue` instead of each message's own")
	fs.StringVar(&r.destCollector, "destination-collector", "", "publish through the broker of this configured `collector`")
	fs.BoolVar(&r.force, "force", false, "override the incident guard (audited)")
	fs.BoolVar(&r.forceWithoutKey, "force-without-key", false, "replay messages that have no idempotency key (audited)")
	fs.BoolVar(&r.acceptKeyRuleChange, "accept-key-rule-change", false, "replay messages whose queue's key rule changed since collection (audited)")
	fs.BoolVar(&r.dryRun, "dry-run", false, "only preview: leave the draft for replay start")
	fs.BoolVar(&o.yes, "yes", false, "start without asking to type the count")
	fs.BoolVar(&o.watch, "watch", false, "then follow the batch like replay watch")
	intervalFlag(fs, o)
}

// check refuses what the server would refuse anyway, with the flags'
// names.
func (r *replayFlags) check(name string, ids, filter bool) error {
	bad := func(s string) error { return &UsageError{Command: name, Problem: s} }
	switch {
	case ids && filter:
		return bad("give message IDs or filter flags, not both")
	case r.haltRefailRatio < 0 || r.haltRefailRatio > 1:
		return bad("--halt-refail-ratio must be between 0 and 1")
	case r.rate < 0 || r.burst < 0 || r.canary < 0:
		return bad("--rate, --burst and --canary cannot be negative")
	}
	return nil
}

// request builds the replay request: the ids or the filter, and the
// members whose flags were given.
func (o *cliOptions) replayRequest() apiclient.ReplayRequest {
	r := o.replay
	req := apiclient.ReplayRequest{Reason: o.reason, DryRun: ptrTo(true)}
	if len(o.args) > 0 {
		ids := append([]string(nil), o.args...)
		req.Ids = &ids
	} else {
		f := o.filter.filter()
		req.Filter = &f
	}
	if o.set["rate"] {
		req.Rate = ptrTo(float32(r.rate))
	}
	if o.set["burst"] {
		req.Burst = &r.burst
	}
	if o.set["canary"] {
		req.Canary = &r.canary
	}
	if o.set["observe"] {
		req.Observe = &r.observe
	}
	if o.set["halt-refail-ratio"] {
		req.HaltRefailRatio = ptrTo(float32(r.haltRefailRatio))
	}
	if r.destQueue != "" || r.destCollector != "" {
		req.Destination = &apiclient.ReplayDestination{}
		if r.destQueue != "" {
			req.Destination.Queue = &r.destQueue
		}
		if r.destCollector != "" {
			req.Destination.Collector = &r.destCollector
		}
	}
	if r.force {
		req.Force = &r.force
	}
	if r.forceWithoutKey {
		req.ForceWithoutKey = &r.forceWithoutKey
	}
	if r.acceptKeyRuleChange {
		req.AcceptKeyRuleChange = &r.acceptKeyRuleChange
	}
	return req
}

func ptrTo[T any](v T) *T { return &v }
