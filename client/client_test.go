package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/client"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

func ptr[T any](v T) *T { return &v }

// newClient serves the API over a fresh SQLite store, as api's own tests
// do, and returns the generated client with an operator and an admin
// token (the admin's by default).
func newClient(t *testing.T) (c *client.ClientWithResponses, as func(secret string) client.RequestEditorFn, operator string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	token := func(name string, role quarantine.Role) string {
		secret, hash := quarantine.NewTokenSecret()
		if err := st.CreateToken(ctx, &quarantine.Token{Name: name, Role: role, SecretHash: hash}, "test"); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	admin, operator := token("admin", quarantine.RoleAdmin), token("operator", quarantine.RoleOperator)
	srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(srv.Close)
	as = func(secret string) client.RequestEditorFn {
		return func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+secret)
			return nil
		}
	}
	c, err = client.NewClientWithResponses(srv.URL, client.WithHTTPClient(srv.Client()), client.WithRequestEditorFn(as(admin)))
	if err != nil {
		t.Fatal(err)
	}
	return c, as, operator
}

func envelope(t *testing.T, queue string, n int, version any) client.Envelope {
	t.Helper()
	var e client.Envelope
	e.Envelope = "quarantine.failure/v1"
	e.Job.Name = "charge"
	e.Job.Queue = ptr(queue)
	e.Job.IdempotencyKey = ptr("key-" + queue + "-" + string(rune('a'+n)))
	e.Job.Payload = map[string]any{"amount": n}
	e.Job.Attempts = ptr(3)
	var sv client.Envelope_Job_SchemaVersion
	var err error
	switch v := version.(type) {
	case string:
		err = sv.FromEnvelopeJobSchemaVersion0(v)
	case float32:
		err = sv.FromEnvelopeJobSchemaVersion1(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	e.Job.SchemaVersion = &sv
	e.Failure.Class = ptr(client.FailureClass("permanent"))
	e.Failure.Reason = ptr("card declined")
	e.Failure.FailedAt = ptr(time.Date(2026, 11, 30, 12, n, 0, 0, time.UTC))
	return e
}

// status fails the test unless res answered want.
func status(t *testing.T, what string, res interface{ StatusCode() int }, body []byte, want int) {
	t.Helper()
	if res.StatusCode() != want {
		t.Fatalf("%s: status %d, want %d: %s", what, res.StatusCode(), want, body)
	}
}

// TestGeneratedClient drives a running server through the client
// oapi-codegen generated from openapi.yaml: what the spec says is what
// the server answers, as a generated client decodes it.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	c, as, operator := newClient(t)
	ctx := t.Context()

	// Ingest: one envelope, then an array (the two shapes of the body).
	var one client.IngestRequest
	if err := one.FromEnvelope(envelope(t, "billing", 0, "v2")); err != nil {
		t.Fatal(err)
	}
	ing, err := c.IngestWithResponse(ctx, nil, one)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "ingest", ing, ing.Body, http.StatusOK)
	if ing.JSON200 == nil || ing.JSON200.Stored != 1 || !ing.JSON200.Items[0].New {
		t.Fatalf("ingest: %s", ing.Body)
	}
	var many client.IngestRequest
	if err := many.FromIngestRequest1([]client.Envelope{envelope(t, "billing", 1, float32(3)), envelope(t, "billing", 2, "v2"), envelope(t, "orders", 3, "v1")}); err != nil {
		t.Fatal(err)
	}
	ing, err = c.IngestWithResponse(ctx, nil, many)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "ingest array", ing, ing.Body, http.StatusOK)
	if ing.JSON200.Received != 3 || ing.JSON200.Stored != 3 {
		t.Fatalf("ingest array: %s", ing.Body)
	}

	// List, filtered.
	list, err := c.ListMessagesWithResponse(ctx, &client.ListMessagesParams{Queue: &client.Queue{"billing"}, Limit: ptr(10)})
	if err != nil {
		t.Fatal(err)
	}
	status(t, "list", list, list.Body, http.StatusOK)
	if len(list.JSON200.Items) != 3 || list.JSON200.NextCursor != nil {
		t.Fatalf("list: %d items, cursor %v", len(list.JSON200.Items), list.JSON200.NextCursor)
	}
	for _, m := range list.JSON200.Items {
		if m.Queue != "billing" || m.Payload != nil {
			t.Fatalf("listed %s of %s with payload %v", m.Id, m.Queue, m.Payload)
		}
	}
	id := list.JSON200.Items[0].Id

	// Get, with its payload and ETag.
	got, err := c.GetMessageWithResponse(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "get", got, got.Body, http.StatusOK)
	m := got.JSON200
	if m.Id != id || m.Payload == nil || got.HTTPResponse.Header.Get("ETag") != `"`+m.PayloadSha256+`"` ||
		got.HTTPResponse.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("get: %s (ETag %q)", got.Body, got.HTTPResponse.Header.Get("ETag"))
	}
	notModified, err := c.GetMessageWithResponse(ctx, id, &client.GetMessageParams{IfNoneMatch: ptr(`"` + m.PayloadSha256 + `"`)})
	if err != nil {
		t.Fatal(err)
	}
	status(t, "get if-none-match", notModified, notModified.Body, http.StatusNotModified)

	// Sample, reproducible by its seed.
	sample, err := c.SampleMessagesWithResponse(ctx, client.SampleRequest{Size: ptr(2), Seed: ptr(7)})
	if err != nil {
		t.Fatal(err)
	}
	status(t, "sample", sample, sample.Body, http.StatusOK)
	again, err := c.SampleMessagesWithResponse(ctx, client.SampleRequest{Size: ptr(2), Seed: ptr(7)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sample.JSON200.Items) != 2 || sample.JSON200.Seed != 7 || again.JSON200.Items[0].Id != sample.JSON200.Items[0].Id {
		t.Fatalf("sample: %s, again %s", sample.Body, again.Body)
	}

	// Edit by an operator with the ETag; the same If-Match again is 412,
	// and an unchanged payload is 422.
	ifMatch := &client.EditPayloadParams{IfMatch: `"` + m.PayloadSha256 + `"`}
	edit, err := c.EditPayloadWithResponse(ctx, id, ifMatch, client.EditRequest{Payload: map[string]any{"amount": 42}, Reason: "fix the amount"}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "edit", edit, edit.Body, http.StatusOK)
	if edit.JSON200.PayloadVersion != 2 || edit.JSON200.PayloadSha256 == m.PayloadSha256 {
		t.Fatalf("edit: %s", edit.Body)
	}
	stale, err := c.EditPayloadWithResponse(ctx, id, ifMatch, client.EditRequest{Payload: map[string]any{"amount": 43}, Reason: "again"}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "stale edit", stale, stale.Body, http.StatusPreconditionFailed)
	if p := stale.ApplicationproblemJSON412; p == nil || p.Field == nil || *p.Field != "If-Match" || !strings.HasPrefix(p.Type, api.ProblemTypePrefix) {
		t.Fatalf("stale edit problem: %s", stale.Body)
	}
	noop, err := c.EditPayloadWithResponse(ctx, id, &client.EditPayloadParams{IfMatch: `"` + edit.JSON200.PayloadSha256 + `"`},
		client.EditRequest{Payload: map[string]any{"amount": 42}, Reason: "same"}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "no-op edit", noop, noop.Body, http.StatusUnprocessableEntity)
	versions, err := c.ListVersionsWithResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "versions", versions, versions.Body, http.StatusOK)
	if len(versions.JSON200.Items) != 2 || versions.JSON200.Items[1].PrevSha256 != m.PayloadSha256 {
		t.Fatalf("versions: %s", versions.Body)
	}

	// Discard: one, then in bulk by ids.
	others := list.JSON200.Items[1:]
	d1, err := c.DiscardMessageWithResponse(ctx, others[0].Id, client.DiscardOne{Reason: "obsolete"}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "discard one", d1, d1.Body, http.StatusOK)
	if d1.JSON200.Status != "discarded" {
		t.Fatalf("discard one: %s", d1.Body)
	}
	bulk, err := c.DiscardMessagesWithResponse(ctx, client.DiscardRequest{Ids: &[]client.ID{others[0].Id, others[1].Id}, Reason: "obsolete"}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "discard bulk", bulk, bulk.Body, http.StatusOK)
	if bulk.JSON200.Matched != 2 || len(bulk.JSON200.Changed) != 1 || len(bulk.JSON200.Skipped) != 1 {
		t.Fatalf("discard bulk: %s", bulk.Body)
	}

	// A replay dry run of the edited message, and its items.
	dry, err := c.CreateReplayWithResponse(ctx, client.ReplayRequest{Ids: &[]client.ID{id}, Reason: "after the fix", DryRun: ptr(true)}, as(operator))
	if err != nil {
		t.Fatal(err)
	}
	status(t, "replay dry run", dry, dry.Body, http.StatusCreated)
	if dry.JSON201.Replay.State != "draft" || dry.JSON201.Replay.Total != 1 {
		t.Fatalf("replay dry run: %s", dry.Body)
	}
	items, err := c.ListReplayItemsWithResponse(ctx, dry.JSON201.Replay.Id, nil)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "replay items", items, items.Body, http.StatusOK)
	if len(items.JSON200.Items) != 1 || items.JSON200.Items[0].MessageId != id || items.JSON200.Items[0].Outcome != "pending" {
		t.Fatalf("replay items: %s", items.Body)
	}

	// The audit chain holds all of it and verifies.
	verify, err := c.VerifyAuditWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "verify", verify, verify.Body, http.StatusOK)
	if !verify.JSON200.Ok || verify.JSON200.Checked < 4 {
		t.Fatalf("verify: %s", verify.Body)
	}

	// An error is a problem the client decodes.
	missing, err := c.GetMessageWithResponse(ctx, quarantine.NewID(time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	status(t, "get unknown", missing, missing.Body, http.StatusNotFound)
	if missing.ApplicationproblemJSON404 == nil || missing.ApplicationproblemJSON404.Status != http.StatusNotFound {
		t.Fatalf("404: %s", missing.Body)
	}
}
