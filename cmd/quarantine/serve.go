package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// HTTP server timeouts: a slow client cannot hold a connection forever,
// and a body of the largest allowed size still has time to arrive.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 2 * time.Minute
	writeTimeout      = 2 * time.Minute
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 20 * time.Second
)

// adminTokenName names the token created when the store holds none.
const adminTokenName = "admin"

func (m *Main) runServe(ctx context.Context) error {
	if err := m.openStore(ctx, m.migrate, hintServe); err != nil {
		return err
	}
	if err := m.checkRuntimeRole(ctx); err != nil {
		return err
	}
	if m.Config.TLS.enabled() {
		every := m.certCheckEvery
		if every == 0 {
			every = certCheckEvery
		}
		certs, err := newCertReloader(m.Config.TLS, every, m.logger.With("component", "tls"))
		if err != nil {
			return err
		}
		m.certs = certs
	}
	ln, err := net.Listen("tcp", m.Config.Listen)
	if err != nil {
		return quarantine.Errorf(quarantine.EUNAVAILABLE, "cannot listen on %s: %v", m.Config.Listen, err)
	}
	m.ln = ln
	if err := m.bootstrapToken(ctx); err != nil {
		return err
	}
	// Logged at every start, so that a later audit verify --head-seq
	// --head-hash can prove the log was not cut or rewritten since.
	head, err := m.store.AuditHead(ctx)
	if err != nil {
		return err
	}
	m.log.Info("audit head", "seq", head.Seq, "hash", head.Hash)

	// One registry for the API's and the collectors' metrics, on /metrics.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prep := &collect.Preparer{Owners: m.Config.Owners, Idempotency: m.Config.Idempotency,
		RedactHeaders: m.Config.RedactHeaders, MaxPayloadBytes: m.Config.Limits.MaxPayloadBytes}
	if err := m.startCollectors(prep, collect.NewMetrics(reg)); err != nil {
		return err
	}
	if err := m.startReplays(reg, m.collectorDeps()); err != nil {
		return err
	}
	if err := m.startAlarms(reg); err != nil {
		return err
	}

	acfg := api.Config{
		Store:           m.replays.wrap(m.store),
		Preparer:        prep,
		Registry:        reg,
		Owners:          m.Config.Owners,
		MaxBodyBytes:    m.Config.Limits.MaxBodyBytes,
		MaxPayloadBytes: m.Config.Limits.MaxPayloadBytes,
		Logger:          m.logger,
		Now:             time.Now,
		RedactPointers:  m.Config.RedactPointers,
		Schemas:         m.Config.Schemas,
		MetricsAuth:     m.Config.Metrics.auth(),
		TrustedProxies:  m.Config.TrustedProxies,
		Replay: rules.ReplayDefaults{
			Rate: m.Config.Replay.Rate, MaxRate: m.Config.Replay.MaxRate, Burst: m.Config.Replay.Burst,
			Canary: m.Config.Replay.Canary, Observe: m.Config.Replay.Observe,
			HaltRefailRatio: m.Config.Replay.HaltRefailRatio, DraftTTL: m.Config.Replay.DraftTTL,
			KeyRule: prep.KeyRule, Collectors: m.collectorNames(),
			MaxReplays: m.Config.Replay.MaxReplays, IncidentWindow: m.Config.Replay.IncidentWindow,
			IncidentRate: m.Config.Replay.IncidentRate, ConfirmAbove: m.Config.Bulk.ConfirmAbove,
			Route: m.replays.routeCheck(),
		},
	}
	// Discards by filter left running by a stopped or dead process go on.
	discardConfirm := m.Config.Bulk.ConfirmAbove
	if discardConfirm == 0 { // bulk.confirm_above: 0 never asks, as for replays
		discardConfirm = -1
	}
	dcfg := rules.DiscardConfig{ConfirmAbove: discardConfirm}
	if p, ok := m.store.(rules.ChunkPaced); ok {
		dcfg.ChunkTarget = p.DiscardChunkTarget()
	}
	if p, ok := m.store.(rules.ChunkSized); ok {
		dcfg.Chunk = p.DiscardChunkMax()
	}
	acfg.Discards = rules.NewDiscards(acfg.Store, dcfg, m.logger)
	if err := acfg.Discards.Resume(ctx); err != nil {
		return err
	}
	m.api = api.New(acfg)
	h := m.api.Handler()
	if h, err = m.withWeb(h, acfg); err != nil {
		return err
	}
	// Always started: besides payloads, it purges ended sessions.
	m.retention = newRetention(m.store, m.Config.Retention, m.logger, reg)
	m.retention.start()
	m.server = &http.Server{
		// Headers above api.MaxHeaderBytes are 431 as problem+json; the
		// server reads up to its larger limit so that the handler sees them.
		Handler:           api.LimitHeaders(api.MaxHeaderBytes)(h),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    api.ServerMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(m.logger.With("component", "http").Handler(), slog.LevelWarn),
	}
	if m.certs != nil {
		m.server.TLSConfig = m.certs.serverTLSConfig()
	}
	m.served = make(chan error, 1)
	go func() {
		var err error
		if m.certs != nil {
			err = m.server.ServeTLS(ln, "", "") // the certificate comes from TLSConfig.GetCertificate
		} else {
			err = m.server.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		m.served <- err
	}()
	m.log.Info("serving", "addr", m.Addr(), "tls", m.certs != nil, "database", m.Config.Database, "version", Version())
	return nil
}

// bootstrapToken creates an admin token when the store holds no active
// one and prints it once: its secret is not stored. Another instance
// creating it at the same time is not an error; that one prints it.
func (m *Main) bootstrapToken(ctx context.Context) error {
	if m.demoRun != nil {
		return nil // the demo prints a login of its own (demoLogin); the tour uses its own token
	}
	n, err := m.store.CountActiveTokens(ctx)
	if err != nil || n > 0 {
		return err
	}
	secret, hash := quarantine.NewTokenSecret()
	t := &quarantine.Token{
		Name:       adminTokenName,
		Role:       quarantine.RoleAdmin,
		Owners:     []string{},
		CreatedBy:  systemActor,
		SecretHash: hash,
	}
	if err := m.store.CreateToken(ctx, t, systemActor); err != nil {
		if quarantine.ErrorCode(err) == quarantine.ECONFLICT {
			return nil
		}
		return err
	}
	m.printAdminToken(Secret(secret))
	return nil
}

// printAdminToken writes the first-start block: the login URL and a curl
// line, each carrying the secret.
func (m *Main) printAdminToken(secret Secret) {
	base := m.URL()
	fmt.Fprintf(m.Stderr, `
    No API token existed, so an admin token was created. It is shown only
    this once: keep it somewhere safe.

    To open quarantine, visit this URL:

        %s/?token=%s

    or call the API with the token:

        curl -H 'Authorization: Bearer %s' %s/api/v1/messages

    Create more tokens with: quarantine token create --name NAME --role viewer|operator|admin

`, base, url.QueryEscape(secret.Reveal()), secret.Reveal(), base)
}

// Addr returns the address the server listens on (with the port chosen
// when listening on port 0), or "" when not serving.
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// URL returns the service's base URL for a local user: https:// when it
// serves TLS, then publicAddr.
func (m *Main) URL() string {
	if m.certs != nil {
		return "https://" + m.publicAddr()
	}
	return "http://" + m.publicAddr()
}

// publicAddr is Addr with an unspecified host (0.0.0.0, ::) replaced by
// the loopback address, for URLs a local user can open.
func (m *Main) publicAddr() string {
	host, port, err := net.SplitHostPort(m.Addr())
	if err != nil {
		return m.Addr()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Wait blocks while the server runs: until ctx is done (nil) or the
// server fails (its error). It returns nil at once for other commands.
func (m *Main) Wait(ctx context.Context) error {
	if m.served == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.served:
		m.served = nil
		return err
	}
}

// Close stops the server gracefully (in-flight requests get up to 20 s)
// and closes the store. It is safe to call more than once.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			if err := m.server.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
			// No request is served any more: write the refused-login
			// counts of the minute under way while the store is open.
			if m.api != nil {
				errs = append(errs, m.api.Close())
			}
		} else if m.ln != nil {
			errs = append(errs, m.ln.Close())
		}
		// Collectors and the retention purge finish their batch in flight
		// while the store is open.
		if err := m.demoRun.stop(); err != nil {
			errs = append(errs, err)
		}
		if err := m.replays.stop(); err != nil {
			errs = append(errs, err)
		}
		m.alarms.stop()
		if err := m.collectors.stop(); err != nil {
			errs = append(errs, err)
		}
		m.retention.stop()
		if m.store != nil {
			errs = append(errs, m.store.Close())
		}
		m.closeErr = errors.Join(errs...)
		if m.server != nil {
			m.log.Info("stopped")
		}
	})
	return m.closeErr
}
