package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/clientip"
	"github.com/quarantine-dev/quarantine/internal/rules"
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
	// MetricsAuth, when it has a token or a user, protects /metrics:
	// Authorization: Bearer TOKEN, or HTTP basic auth (Prometheus's
	// authorization or basic_auth of a scrape config). Nil or empty
	// leaves /metrics open.
	MetricsAuth *MetricsAuth
	// Registry receives the API's metrics and is served on /metrics. Nil
	// gives a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// RedactPointers are JSON Pointers (RFC 6901) into payloads whose
	// values viewers see as "<redacted>"; operators and admins see them.
	// Each must pass ValidatePointer (New panics otherwise: a wiring bug).
	RedactPointers []string
	// Schemas holds the JSON Schema of each job name (see CompileSchema):
	// an edited payload of that job must validate against it.
	Schemas map[string]*rules.Schema
	// Replay holds the defaults and limits of replay requests.
	Replay rules.ReplayDefaults
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (config trusted_proxies): refused logins are counted and
	// throttled per client. The zero value trusts none: the client is
	// the TCP peer.
	TrustedProxies clientip.Proxies
	// Discards runs the discards by filter (nil: a runner with the
	// defaults of rules.DiscardConfig). Close stops it.
	Discards *rules.Discards
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	handler  http.Handler
	refusals *refusals // failed logins per client: throttle and audit
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
	for _, p := range cfg.RedactPointers {
		if err := ValidatePointer(p); err != nil {
			panic("api: Config.RedactPointers: " + err.Error())
		}
	}
	if cfg.Replay.Owners == nil {
		cfg.Replay.Owners = cfg.Owners
	}
	cfg.Replay = cfg.Replay.WithDefaults()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Discards == nil {
		cfg.Discards = rules.NewDiscards(cfg.Store, rules.DiscardConfig{}, cfg.Logger)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), metrics: newMetrics(cfg.Registry)}
	s.refusals = newRefusals(cfg.Now, func(ctx context.Context, ev quarantine.AuditEvent) error {
		_, err := cfg.Store.AppendAudit(ctx, ev)
		return err
	}, s.log)
	s.handler = s.routes()
	return s
}

// Handler returns the server's routes as one http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close writes the refused-login counts of the current minute (the
// auth.refused events), which would otherwise be written when the minute
// ends. Call it once the HTTP server has stopped taking requests and
// before the store closes. It returns nil; a count that cannot be written
// is logged.
func (s *Server) Close() error {
	s.cfg.Discards.Close()
	s.refusals.flushAll()
	return nil
}

// routes is the one route table; openapi.yaml lists the same routes.
func (s *Server) routes() *chi.Mux {
	r := chi.NewRouter()
	// GetHead answers HEAD on every GET route as GET, and net/http drops
	// the body.
	r.Use(middleware.GetHead, s.requestID, s.observe, s.recoverPanics)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.protectMetrics(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))

	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		read, operate := r.With(s.require(ruleRead)), r.With(s.require(ruleOperate))
		audit, admin := r.With(s.require(ruleAudit)), r.With(s.require(ruleAdmin))

		r.With(s.require(ruleIngest)).Post("/api/v1/ingest", s.ingest)
		read.Get("/api/v1/messages", s.listMessages)
		read.Post("/api/v1/messages/sample", s.sampleMessages)
		operate.Post("/api/v1/messages/discard", s.discardMessages)
		read.Get("/api/v1/discards/{id}", s.getDiscard)
		operate.Post("/api/v1/discards/{id}/resume", s.resumeDiscard)
		operate.Post("/api/v1/messages/rekey", s.rekeyMessages)
		read.Get("/api/v1/messages/{id}", s.getMessage)
		read.Get("/api/v1/messages/{id}/versions", s.listVersions)
		read.Get("/api/v1/messages/{id}/versions/{version}", s.getVersion)
		operate.Put("/api/v1/messages/{id}/payload", s.editPayload)
		operate.Post("/api/v1/messages/{id}/discard", s.discardMessage)
		read.Get("/api/v1/groups", s.listGroups)
		read.Get("/api/v1/queues", s.listQueues)
		read.Get("/api/v1/alarms", s.listAlarms)
		operate.Post("/api/v1/replays", s.createReplay)
		read.Get("/api/v1/replays", s.listReplays)
		read.Get("/api/v1/replays/{id}", s.getReplay)
		read.Get("/api/v1/replays/{id}/items", s.listReplayItems)
		read.Get("/api/v1/replays/{id}/report", s.replayReport)
		operate.Post("/api/v1/replays/{id}/start", s.changeReplay(quarantine.ReplayActStart))
		operate.Post("/api/v1/replays/{id}/pause", s.changeReplay(quarantine.ReplayActPause))
		operate.Post("/api/v1/replays/{id}/resume", s.changeReplay(quarantine.ReplayActResume))
		operate.Post("/api/v1/replays/{id}/cancel", s.changeReplay(quarantine.ReplayActCancel))
		audit.Get("/api/v1/audit", s.listAudit)
		audit.Get("/api/v1/audit/export", s.exportAudit)
		audit.Get("/api/v1/audit/verify", s.verifyAudit)
		admin.Get("/api/v1/tokens", s.listTokens)
		admin.Post("/api/v1/tokens", s.createToken)
		admin.Delete("/api/v1/tokens/{id}", s.revokeToken)
	})
	return r
}
