package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	apiclient "github.com/quarantine-dev/quarantine/client"
)

func (c *cliRun) alarmsList(ctx context.Context) error {
	res, err := c.api.ListAlarmsWithResponse(ctx)
	if err != nil {
		return err
	}
	return list(c, res.Body, res.JSON200.Items, nil,
		[]string{"ALARM", "QUEUE", "OWNER", "STATE", "FOR", "OLDEST", "DEPTH", "INFLOW/MIN", "REASON"},
		func(a apiclient.AlarmState) []string {
			return []string{safe(a.Alarm), clip(safe(a.Queue), 30), clip(safe(a.Owner), 20), string(a.State), ago(a.Since),
				seconds(float64(a.AgeSeconds)), strconv.Itoa(a.Depth), strconv.FormatFloat(float64(a.InflowPerMinute), 'f', 1, 32),
				clip(safe(a.Reason), 60)}
		})
}

// remoteVerifyFlags adds --server and the other connection flags to
// audit verify: with --server it asks the server to verify the chain
// instead of opening the database.
func (m *Main) remoteVerifyFlags(fs *flag.FlagSet) {
	m.cli = &cliOptions{command: cliCommand{name: cmdAuditVerify}, set: map[string]bool{}, verifyRun: true}
	connectionFlags(fs, m.cli)
}

// checkRemoteVerify settles audit verify --server after its flags are
// parsed: without --server it verifies the database (m.cli is dropped);
// with it, --config and --database do not apply.
func (m *Main) checkRemoteVerify(set map[string]bool) error {
	o := m.cli
	if !set["server"] {
		m.cli = nil
		if set["token"] || set["output"] || set["cli-config"] {
			return &UsageError{Command: cmdAuditVerify, Problem: "--token, --output and --cli-config go with --server (without it, audit verify opens the database)"}
		}
		return nil
	}
	if set["database"] || set["config"] {
		return &UsageError{Command: cmdAuditVerify, Problem: "--server asks a server; --database and --config verify a database directly: give one or the other"}
	}
	o.set = set
	if err := o.check(); err != nil {
		return err
	}
	return o.resolve(m.Getenv)
}

// auditVerify asks the server to walk the audit chain (the head given by
// --head-seq and --head-hash must be on it).
func (c *cliRun) auditVerify(ctx context.Context) error {
	p := &apiclient.VerifyAuditParams{}
	if v := c.m.verify; v.headSeq > 0 {
		seq := strconv.FormatInt(v.headSeq, 10)
		p.HeadSeq, p.HeadHash = &seq, &v.headHash
	}
	res, err := c.api.VerifyAuditWithResponse(ctx, p)
	if err != nil {
		return err
	}
	v := res.JSON200
	if c.json() {
		err = c.printJSON(res.Body)
	} else {
		ok := "yes"
		if !v.Ok {
			ok = "NO"
		}
		err = c.fields([][2]string{
			{"verified", ok},
			{"checked", strconv.Itoa(v.Checked) + " events"},
			{"head", fmt.Sprintf("seq %d, hash %s", v.Head.Seq, v.Head.Hash)},
			{"problem", safe(deref(v.Problem))},
		})
	}
	if err != nil {
		return err
	}
	if !v.Ok {
		bad := 0
		if v.FirstBadSeq != nil {
			bad = *v.FirstBadSeq
		}
		return fmt.Errorf("%w: first bad event %d: %s", errChainBroken, bad, safe(deref(v.Problem)))
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
