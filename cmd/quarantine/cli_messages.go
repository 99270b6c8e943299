package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	apiclient "github.com/quarantine-dev/quarantine/client"
)

func (c *cliRun) messagesList(ctx context.Context) error {
	p, err := params[apiclient.ListMessagesParams](c.o.filter.filter())
	if err != nil {
		return err
	}
	p.Limit = &c.o.limit
	if c.o.cursor != "" {
		p.Cursor = &c.o.cursor
	}
	res, err := c.api.ListMessagesWithResponse(ctx, p)
	if err != nil {
		return err
	}
	return list(c, res.Body, res.JSON200.Items, res.JSON200.NextCursor,
		[]string{"ID", "QUEUE", "JOB", "CLASS", "STATUS", "AGE", "KEY", "REASON"},
		func(m apiclient.Message) []string {
			return []string{m.Id, clip(safe(m.Queue), 30), clip(safe(m.JobName), 30), string(m.FailureClass),
				string(m.Status), ago(m.FailedAt), clip(safe(m.IdempotencyKey), 24), clip(safe(m.Reason), 60)}
		})
}

// rawPayload is a message's payload as the server sent it.
type rawPayload struct {
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 []byte          `json:"payload_base64"`
}

// bytes returns the payload's bytes, byte-exact, and whether it is JSON.
func (p rawPayload) bytes() ([]byte, bool) {
	if p.Payload != nil {
		return p.Payload, true
	}
	return p.PayloadBase64, false
}

func (c *cliRun) messagesShow(ctx context.Context) error {
	res, err := c.api.GetMessageWithResponse(ctx, c.o.args[0], nil)
	if err != nil {
		return err
	}
	var raw rawPayload
	if err := json.Unmarshal(res.Body, &raw); err != nil {
		return err
	}
	if c.o.payloadOnly {
		b, _ := raw.bytes()
		_, err := c.out.Write(b)
		return err
	}
	if c.json() {
		return c.printJSON(res.Body)
	}
	m := res.JSON200
	headers := make([]string, 0, len(m.Headers))
	for k, v := range m.Headers {
		headers = append(headers, safe(k)+"="+clip(safe(v), 80))
	}
	redacted := ""
	if m.PayloadRedacted != nil && *m.PayloadRedacted {
		redacted = " (values at the redaction pointers masked)"
	}
	replays := ""
	if m.ReplayCount > 0 || m.RefailOf != "" {
		replays = fmt.Sprintf("%d times", m.ReplayCount)
		if m.RefailOf != "" {
			replays += ", re-failed from " + m.RefailOf
		}
	}
	key := safe(m.IdempotencyKey)
	if key == "" {
		key = "(none)"
	}
	err = c.fields([][2]string{
		{"id", m.Id},
		{"status", string(m.Status)},
		{"queue", safe(m.Queue)},
		{"owner", safe(m.Owner)},
		{"job", job(m)},
		{"failure", string(m.FailureClass) + ": " + safe(m.Reason)},
		{"failed at", timeAgo(&m.FailedAt)},
		{"first failed at", timeAgo(m.FirstFailedAt)},
		{"source", fmt.Sprintf("%s (%s), message id %s", safe(m.Source), m.SourceKind, safe(m.MessageId))},
		{"idempotency key", key + " (rule " + safe(m.KeyRule) + ")"},
		{"fingerprint", safe(m.Fingerprint)},
		{"replayed", replays},
		{"flags", safe(strings.Join(m.Flags, ", "))},
		{"headers", strings.Join(headers, " ")},
		{"payload", fmt.Sprintf("version %d, %d bytes, %s, sha256 %s%s", m.PayloadVersion, m.PayloadSize, safe(m.ContentType), m.PayloadSha256, redacted)},
	})
	if err != nil {
		return err
	}
	return c.printPayload(raw)
}

// printPayload shows a payload for a terminal: JSON indented, text as it
// is, other bytes as their size (messages show --payload gives them).
func (c *cliRun) printPayload(raw rawPayload) error {
	b, isJSON := raw.bytes()
	var text string
	switch {
	case isJSON:
		var ind bytes.Buffer
		if json.Indent(&ind, b, "", "  ") == nil {
			b = ind.Bytes()
		}
		text = string(b)
	case utf8.Valid(b) && !bytes.ContainsRune(b, 0):
		text = string(b)
	default:
		text = fmt.Sprintf("(%d bytes of binary; quarantine messages show --payload writes them)", len(b))
	}
	_, err := fmt.Fprintf(c.out, "\n%s\n", strings.TrimRight(safeLines(text), "\n"))
	return err
}

func (c *cliRun) messagesEdit(ctx context.Context) error {
	id := c.o.args[0]
	payload, err := c.readPayload()
	if err != nil {
		return err
	}
	cur, err := c.api.GetMessageWithResponse(ctx, id, nil)
	if err != nil {
		return err
	}
	ifMatch := c.o.ifMatch
	if ifMatch == "" {
		ifMatch = cur.JSON200.PayloadSha256
	}
	ctype := c.o.ctype
	if ctype == "" {
		ctype = cur.JSON200.ContentType
	}
	body := editBody(payload, isJSONType(ctype), c.o.ctype, c.o.reason)
	res, err := c.api.EditPayloadWithBodyWithResponse(ctx, id, &apiclient.EditPayloadParams{IfMatch: strconv.Quote(ifMatch)},
		"application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(res.Body)
	}
	m := res.JSON200
	_, err = fmt.Fprintf(c.out, "message %s: payload version %d, %d bytes, %s, sha256 %s\n",
		m.Id, m.PayloadVersion, m.PayloadSize, safe(m.ContentType), m.PayloadSha256)
	return err
}

// readPayload reads --payload-file: a file, or stdin for -.
func (c *cliRun) readPayload() ([]byte, error) {
	if c.o.payload == "-" {
		if c.in == nil {
			return nil, fmt.Errorf("--payload-file -: no standard input")
		}
		return io.ReadAll(c.in)
	}
	return os.ReadFile(c.o.payload)
}

// editBody is the body of an edit. A JSON payload for a JSON content
// type goes under "payload" as it is (the server stores those bytes, so
// the body is written by hand: encoding/json would compact them), minus
// the whitespace around it; anything else goes under payload_base64,
// byte-exact.
func editBody(payload []byte, asJSON bool, ctype, reason string) []byte {
	var b bytes.Buffer
	trimmed := bytes.TrimSpace(payload)
	if asJSON && json.Valid(trimmed) {
		b.WriteString(`{"payload":`)
		b.Write(trimmed)
	} else {
		b.WriteString(`{"payload_base64":`)
		enc, _ := json.Marshal(base64.StdEncoding.EncodeToString(payload))
		b.Write(enc)
	}
	if ctype != "" {
		enc, _ := json.Marshal(ctype) // a string always marshals
		b.WriteString(`,"content_type":`)
		b.Write(enc)
	}
	enc, _ := json.Marshal(reason)
	b.WriteString(`,"reason":`)
	b.Write(enc)
	b.WriteByte('}')
	return b.Bytes()
}

// isJSONType tells whether a content type is JSON (application/json or
// a +json type).
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func (c *cliRun) messagesDiscard(ctx context.Context) error {
	if len(c.o.args) == 1 {
		res, err := c.api.DiscardMessageWithResponse(ctx, c.o.args[0], apiclient.DiscardOne{Reason: c.o.reason})
		if err != nil {
			return err
		}
		if c.json() {
			return c.printJSON(res.Body)
		}
		_, err = fmt.Fprintf(c.out, "message %s: %s\n", res.JSON200.Id, res.JSON200.Status)
		return err
	}
	ids := append([]string(nil), c.o.args...)
	res, err := c.api.DiscardMessagesWithResponse(ctx, apiclient.DiscardRequest{Ids: &ids, Reason: c.o.reason})
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(res.Body)
	}
	r := res.JSON200
	rows := make([][]string, 0, len(r.Changed)+len(r.Skipped))
	for _, id := range r.Changed {
		rows = append(rows, []string{id, "discarded", ""})
	}
	for _, s := range r.Skipped {
		rows = append(rows, []string{s.Id, "skipped", clip(safe(s.Reason), 80)})
	}
	if err := c.table([]string{"ID", "RESULT", "WHY"}, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.out, "%d discarded, %d skipped\n", len(r.Changed), len(r.Skipped))
	return err
}

func (c *cliRun) groupsList(ctx context.Context) error {
	p, err := params[apiclient.ListGroupsParams](c.o.filter.filter())
	if err != nil {
		return err
	}
	p.Limit = &c.o.limit
	res, err := c.api.ListGroupsWithResponse(ctx, p)
	if err != nil {
		return err
	}
	return list(c, res.Body, res.JSON200.Items, nil,
		[]string{"COUNT", "FINGERPRINT", "JOB", "CLASS", "QUEUES", "LAST", "EXAMPLE", "REASON"},
		func(g apiclient.Group) []string {
			return []string{strconv.Itoa(g.Count), safe(g.Fingerprint), clip(safe(g.JobName), 30), string(g.FailureClass),
				clip(safe(strings.Join(g.Queues, ",")), 30), ago(g.LastFailedAt), g.ExampleId, clip(safe(g.Reason), 60)}
		})
}

// job is a message's job name, with its schema version and attempts.
func job(m *apiclient.Message) string {
	s := safe(m.JobName)
	if m.SchemaVersion != "" {
		s += " schema " + safe(m.SchemaVersion)
	}
	return fmt.Sprintf("%s, %d attempts", s, m.Attempts)
}
