package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/quarantine-dev/quarantine"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
)

// version is set at build time with -ldflags "-X main.version=…"; the
// module version from the build info is used otherwise.
var version = ""

// Version returns the program's version.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// systemActor creates the first-start admin token in the audit log;
// cliActor creates tokens from the command line.
const (
	systemActor = "system"
	cliActor    = "cli"
)

// Run executes the parsed command. For serve it opens the store, starts
// listening and returns; Wait then blocks while serving. The other
// commands run to completion. Errors are the store's *quarantine.Error
// values; audit verify returns an error after printing a broken chain.
func (m *Main) Run(ctx context.Context) error {
	if m.command == "" { // ParseFlags was not called: serve the defaults
		m.command = cmdServe
		if m.Config.Listen == "" {
			m.Config = DefaultConfig()
		}
	}
	m.logger = newLogger(m.Stderr, m.Config.Log)
	m.log = m.logger.With("component", "main")
	if m.cli != nil {
		return m.runCLI(ctx)
	}
	switch m.command {
	case cmdVersion:
		_, err := fmt.Fprintf(m.Stdout, "quarantine %s %s/%s %s\n", Version(), runtime.GOOS, runtime.GOARCH, runtime.Version())
		return err
	case cmdMigrate:
		return m.runMigrate(ctx)
	case cmdTokenCreate:
		return m.runTokenCreate(ctx)
	case cmdAuditVerify:
		return m.runAuditVerify(ctx)
	case cmdDemo:
		return m.runDemo(ctx)
	}
	return m.runServe(ctx)
}

// openStore opens the configured store. The embedded store, and any store
// when migrate is set, is migrated; otherwise a schema behind this build
// is an ECONFLICT error telling how to migrate.
func (m *Main) openStore(ctx context.Context, migrate bool, hint string) error {
	url := m.Config.Database
	s, err := storeopen.Store(ctx, url.Reveal())
	if err != nil {
		return err
	}
	m.store = s
	if migrate || storeopen.IsEmbedded(url.Reveal()) {
		before, _, _ := s.SchemaVersion(ctx)
		if err := s.Migrate(ctx); err != nil {
			return err
		}
		after, _, err := s.SchemaVersion(ctx)
		if err != nil {
			return err
		}
		if after != before {
			m.log.Info("migrated the database", "database", url, "from", before, "to", after)
		}
		return nil
	}
	current, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	switch {
	case current < latest:
		return quarantine.Errorf(quarantine.ECONFLICT,
			"the database schema is at version %d but this build needs version %d: %s", current, latest, hint)
	case current > latest:
		// A rolling upgrade migrated first: the newer migrations only
		// expand the schema unless one says it contracts.
		contracts, err := s.ContractsAbove(ctx, latest)
		if err != nil {
			return err
		}
		if len(contracts) > 0 {
			return quarantine.Errorf(quarantine.ECONFLICT,
				"the database schema is at version %d, newer than this build knows (%d), and migration %d removed what this build uses: upgrade quarantine",
				current, latest, contracts[0])
		}
		m.log.Warn("the database schema is newer than this build: serving on it (its newer migrations only expand it); finish the upgrade",
			"schema", current, "build", latest)
	}
	return nil
}

const (
	hintServe   = `run "quarantine migrate" first, or start with "quarantine serve --migrate"`
	hintCommand = `run "quarantine migrate" first`
)

func (m *Main) runMigrate(ctx context.Context) error {
	if err := m.openStore(ctx, true, ""); err != nil {
		return err
	}
	current, latest, err := m.store.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if _, err = fmt.Fprintf(m.Stdout, "database %s: schema at version %d of %d\n", m.Config.Database, current, latest); err != nil {
		return err
	}
	if role := m.Config.DatabaseRuntimeRole; role != "" {
		g, ok := m.store.(runtimeGranter)
		if !ok {
			return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role", "applies to PostgreSQL only")
		}
		if err := g.GrantRuntime(ctx, role); err != nil {
			return err
		}
		m.log.Info("granted the runtime role", "role", role)
		_, err = fmt.Fprintf(m.Stdout, "runtime role %s: granted what serve needs\n", role)
	}
	return err
}

// runtimeGranter is a store with database roles (store/postgres): it
// grants a runtime role exactly what serve needs, and tells which role it
// runs as.
type runtimeGranter interface {
	GrantRuntime(ctx context.Context, role string) error
	SessionUser(ctx context.Context) (string, error)
}

// checkRuntimeRole refuses to serve as another role than the configured
// runtime role: a serve given the owner's URL by mistake could rewrite
// the audit log. Errors: EINVALID naming database_runtime_role.
func (m *Main) checkRuntimeRole(ctx context.Context) error {
	want := m.Config.DatabaseRuntimeRole
	g, ok := m.store.(runtimeGranter)
	if want == "" || !ok {
		return nil
	}
	got, err := g.SessionUser(ctx)
	if err != nil {
		return err
	}
	if got != want {
		return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role",
			"serve connects to the database as %q, not as the runtime role %q: give serve the runtime role's database URL", got, want)
	}
	return nil
}

func (m *Main) runTokenCreate(ctx context.Context) error {
	role, err := quarantine.ParseRole(m.token.role)
	if err != nil {
		return err
	}
	secret, hash := quarantine.NewTokenSecret()
	t := &quarantine.Token{
		Name:       m.token.name,
		Role:       role,
		Owners:     m.token.owners,
		CreatedBy:  cliActor,
		SecretHash: hash,
	}
	if t.Owners == nil {
		t.Owners = []string{}
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if err := m.openStore(ctx, false, hintCommand); err != nil {
		return err
	}
	if err := m.store.CreateToken(ctx, t, cliActor); err != nil {
		return err
	}
	m.log.Debug("token created", "id", t.ID, "name", t.Name, "role", t.Role)
	_, err = fmt.Fprintln(m.Stdout, secret)
	return err
}

func (m *Main) runAuditVerify(ctx context.Context) error {
	if err := m.openStore(ctx, false, hintCommand); err != nil {
		return err
	}
	var expect []quarantine.AuditHead
	if m.verify.headSeq > 0 {
		expect = append(expect, quarantine.AuditHead{Seq: m.verify.headSeq, Hash: m.verify.headHash})
	}
	v, err := m.store.VerifyAudit(ctx, expect...)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if !v.OK {
		return fmt.Errorf("%w: first bad event %d: %s", errChainBroken, v.FirstBadSeq, v.Problem)
	}
	return nil
}

// newLogger returns the logger the configuration asks for, on w.
func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
