package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/store"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxBodyBytes    = 10 << 20 // 10 MiB
	DefaultMaxPayloadBytes = 1 << 20  // 1 MiB
	// MaxIngestElements caps the envelopes of one ingest request.
	MaxIngestElements = 10000
)

// Config is what the API needs. Store is required; the rest has defaults.
type Config struct {
	Store store.Store
	// Preparer applies the idempotency rules, header redaction and owner
	// rules to ingested messages, as the collectors do. Nil gives one with
	// Owners and the default redaction.
	Preparer        *collect.Preparer
	Owners          []quarantine.OwnerRule
	MaxBodyBytes    int64 // hard cap per request body; above it 413 and nothing is stored (default 10 MiB)
	MaxPayloadBytes int   // soft cap per payload; above it stored and flagged (default 1 MiB)
	Logger          *slog.Logger
	Now             func() time.Time
	// Registry receives the API's metrics and is served on /metrics. Nil
	// gives a new registry with the Go and process collectors.
	Registry *prometheus.Registry
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	handler http.Handler
}

// New returns a server for cfg, filling defaults. It panics if cfg.Store is
// nil, or if cfg.Registry already holds metrics of the same names (a
// wiring bug).
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("api: Config.Store is nil")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Preparer == nil {
		cfg.Preparer = &collect.Preparer{Owners: cfg.Owners}
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), metrics: newMetrics(cfg.Registry)}
	s.handler = s.routes()
	return s
}

// Handler returns the server's routes as one http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// routes is the one route table; openapi.yaml lists the same routes.
func (s *Server) routes() *chi.Mux {
	r := chi.NewRouter()
	r.Use(s.requestID, s.observe, s.recoverPanics)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))

	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.With(s.require(ruleIngest)).Post("/api/v1/ingest", s.ingest)
		r.With(s.require(ruleRead)).Get("/api/v1/messages", s.listMessages)
		r.With(s.require(ruleRead)).Get("/api/v1/messages/{id}", s.getMessage)
		r.With(s.require(ruleAudit)).Get("/api/v1/audit", s.listAudit)
		r.With(s.require(ruleAudit)).Get("/api/v1/audit/verify", s.verifyAudit)
	})
	return r
}
