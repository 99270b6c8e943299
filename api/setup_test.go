package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// specPath is the spec the server must match.
const specPath = "../openapi.yaml"

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
	specMu     sync.Mutex // schema validation is not documented as safe for concurrent use
)

// loadSpec loads and validates openapi.yaml once per test binary.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromFile(specPath)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(context.Background()); specErr != nil {
			return
		}
		// The router matches requests to the spec's servers; the tests'
		// servers listen on random ports, so match paths on any host.
		routed := *specDoc
		routed.Servers = nil
		specRouter, specErr = legacy.NewRouter(&routed)
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjsonDecoder)
	})
	if specErr != nil {
		t.Fatalf("openapi.yaml: %v", specErr)
	}
	return specDoc, specRouter
}

// env is one server over a fresh SQLite store, with a token per role.
type env struct {
	t        *testing.T
	store    store.Store
	srv      *httptest.Server
	api      *api.Server
	admin    string // secrets
	operator string
	viewer   string
}

type envOpt func(*api.Config)

func withMaxBody(n int64) envOpt     { return func(c *api.Config) { c.MaxBodyBytes = n } }
func withMaxPayload(n int) envOpt    { return func(c *api.Config) { c.MaxPayloadBytes = n } }
func withStore(s store.Store) envOpt { return func(c *api.Config) { c.Store = s } }
func withRedact(pointers ...string) envOpt {
	return func(c *api.Config) { c.RedactPointers = pointers }
}
func withPreparer(p *collect.Preparer) envOpt { return func(c *api.Config) { c.Preparer = p } }
func withSchemas(m map[string]*rules.Schema) envOpt {
	return func(c *api.Config) { c.Schemas = m }
}
func withNow(now func() time.Time) envOpt { return func(c *api.Config) { c.Now = now } }

// owners gives queues payments.* and billing to team payments, orders.* to
// team orders.
var owners = []quarantine.OwnerRule{
	{Team: "payments", Queues: []string{"payments.*", "billing"}},
	{Team: "orders", Queues: []string{"orders.*"}},
}

// envStore names the store the API tests run on: the embedded SQLite by
// default, PostgreSQL (a fresh schema per test) with
// QUARANTINE_API_TEST_STORE=postgres.
const envStore = "QUARANTINE_API_TEST_STORE"

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	var err error
	if os.Getenv(envStore) == "postgres" {
		st, err = storeopen.Store(ctx, pgtest.URL(t))
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{Store: st, Owners: owners, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, store: st}
	e.api = api.New(cfg)
	e.srv = httptest.NewServer(e.api.Handler())
	t.Cleanup(e.srv.Close)
	e.admin = e.token("admin", quarantine.RoleAdmin)
	e.operator = e.token("operator", quarantine.RoleOperator)
	e.viewer = e.token("viewer", quarantine.RoleViewer)
	return e
}

// token creates a token and returns its secret.
func (e *env) token(name string, role quarantine.Role, owners ...string) string {
	e.t.Helper()
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: name, Role: role, Owners: owners, SecretHash: hash}
	if err := e.store.CreateToken(context.Background(), tok, "test"); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// resp is a response read whole.
type resp struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

// do sends a request with the secret as bearer token ("" for none) and
// checks the response against openapi.yaml.
func (e *env) do(method, target, secret string, body []byte, header ...string) *resp {
	e.t.Helper()
	r, err := e.send(method, target, secret, body, header...)
	if err != nil {
		e.t.Fatal(err)
	}
	checkResponse(e.t, r.req, r)
	return r
}

// send is do without the checks, for goroutines: the caller checks.
func (e *env) send(method, target, secret string, body []byte, header ...string) (*resp, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+target, rd)
	if err != nil {
		return nil, err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &resp{req: req, status: res.StatusCode, header: res.Header, body: b}, nil
}

func (e *env) get(target, secret string) *resp { return e.do(http.MethodGet, target, secret, nil) }

func (e *env) ingest(secret string, body []byte) *resp {
	return e.do(http.MethodPost, "/api/v1/ingest", secret, body)
}

// checkResponse validates a response against the spec: its route's
// declared response, or the Problem schema for paths the spec does not
// have. Every response must carry a request id, and every error must be
// problem+json.
func checkResponse(t *testing.T, req *http.Request, r *resp) {
	t.Helper()
	doc, router := loadSpec(t)
	if r.header.Get("X-Request-Id") == "" {
		t.Fatalf("%s %s: no X-Request-Id", req.Method, req.URL.Path)
	}
	if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%s %s: status %d with content type %q", req.Method, req.URL.Path, r.status, r.header.Get("Content-Type"))
	}
	specMu.Lock()
	defer specMu.Unlock()
	route, params, err := router.FindRoute(req)
	if err != nil {
		if r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s is not in the spec but answered %d", req.Method, req.URL.Path, r.status)
		}
		var v any
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("problem body: %v", err)
		}
		if err := doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Fatalf("%s %s: body does not match Problem: %v\n%s", req.Method, req.URL.Path, err, r.body)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Fatalf("%s %s → %d does not match openapi.yaml: %v\n%s", req.Method, req.URL.String(), r.status, err, clipBody(r.body))
	}
}

// ndjsonDecoder checks a JSON Lines body: every line must match the
// contentSchema of the response's schema. The body is then validated as
// the string the spec declares.
func ndjsonDecoder(body io.Reader, _ http.Header, ref *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("JSON Lines body does not end with a newline")
	}
	if ref == nil || ref.Value == nil || ref.Value.ContentSchema == nil || ref.Value.ContentSchema.Value == nil {
		return nil, errors.New("the spec gives no contentSchema for the lines of this JSON Lines body")
	}
	name := strings.TrimPrefix(ref.Value.ContentSchema.Ref, "#/components/schemas/")
	schema := ref.Value.ContentSchema.Value
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(b) == 0 {
			break
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			return nil, fmt.Errorf("line %d is not a %s: %w", i+1, name, err)
		}
	}
	return string(b), nil
}

// send marshals v as the JSON body of a request (raw bytes stay as they are).
func (e *env) json(method, target, secret string, v any, header ...string) *resp {
	e.t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.do(method, target, secret, b, header...)
}

// status fails the test unless r has the status, and returns r.
func (r *resp) want(t *testing.T, status int) *resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s %s: status %d, want %d: %s", r.req.Method, r.req.URL.Path, r.status, status, clipBody(r.body))
	}
	return r
}

// ingestOne stores one message of queue with the JSON payload and
// returns its id.
func (e *env) ingestOne(queue, job string, payload string) string {
	e.t.Helper()
	env := []byte(`{"envelope":"quarantine.failure/v1","job":{"name":` + strconv.Quote(job) + `,"queue":` + strconv.Quote(queue) +
		`,"idempotency_key":"k-` + quarantine.NewID(time.Now()) + `","payload":` + payload + `},"failure":{"class":"permanent","reason":"bad"}}`)
	return e.ingestOK(e.admin, env).Items[0].ID
}

// deniedTo returns the access.denied events whose actor is token:name.
func (e *env) deniedTo(name string) []auditEvent {
	e.t.Helper()
	r := e.get("/api/v1/audit?action=access.denied&limit=1000&actor=token:"+name, e.admin)
	if r.status != http.StatusOK {
		e.t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var page struct{ Items []auditEvent }
	r.decode(e.t, &page)
	return page.Items
}

func clipBody(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// decode unmarshals the body into v.
func (r *resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s: %v", clipBody(r.body), err)
	}
}

// problem checks that r is a problem with the status and field and returns it.
func (r *resp) problem(t *testing.T, status int, field string) api.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, clipBody(r.body))
	}
	var p api.Problem
	r.decode(t, &p)
	if p.Status != status || p.Field != field || !strings.HasPrefix(p.Type, api.ProblemTypePrefix) || p.Detail == "" ||
		p.RequestID != r.header.Get("X-Request-Id") {
		t.Fatalf("problem %+v, want status %d field %q", p, status, field)
	}
	return p
}

// envelopeJSON returns a valid envelope for queue with a distinct payload.
func envelopeJSON(queue, job string, n int, failedAt time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"envelope": "quarantine.failure/v1",
		"job": map[string]any{"id": "job-" + queue + "-" + strconv.Itoa(n), "name": job, "queue": queue,
			"idempotency_key": "key-" + strconv.Itoa(n), "attempts": 3, "payload": map[string]any{"n": n}},
		"failure": map[string]any{"class": "exhausted", "reason": "timeout", "failed_at": failedAt.Format(time.RFC3339Nano)},
	})
	return b
}

// array joins envelopes into a JSON array.
func array(elems ...[]byte) []byte {
	return append(append([]byte("["), bytes.Join(elems, []byte(","))...), ']')
}

var baseTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// apiConfig is a configuration over e's store, for a second server.
func apiConfig(e *env) api.Config {
	return api.Config{Store: e.store, Owners: owners, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}
