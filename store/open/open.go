// Package open opens the store a database URL names. It is the one
// package that links both drivers; the store contract (package store)
// links none, so that a package needing only the contract (api) does not
// pull in either database.
package open

import (
	"context"
	"net/url"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// DefaultURL is the database used when none is configured: an embedded
// SQLite file under the working directory.
const DefaultURL = "sqlite:./quarantine-data/quarantine.db"

// The implementations satisfy the contract. The assertions live here, the
// one package that imports both, so that neither imports this one.
var (
	_ store.Store = (*sqlite.Store)(nil)
	_ store.Store = (*postgres.Store)(nil)
)

// Store connects to the store named by a database URL:
//
//	sqlite:PATH                  embedded SQLite at PATH (relative to the
//	                             working directory, or absolute), for example
//	                             sqlite:./quarantine-data/quarantine.db or
//	                             sqlite:/var/lib/quarantine/quarantine.db
//	postgres://USER:PASS@HOST:PORT/DB?sslmode=…   PostgreSQL (postgresql:// too)
//
// Only the single-colon form sqlite:PATH names SQLite; sqlite://… is
// rejected so that a host-like path is never misread. Open does not migrate:
// the caller calls Migrate, or checks SchemaVersion. A URL of any other form
// is EINVALID naming "database"; its password never appears in the error.
func Store(ctx context.Context, url string) (store.Store, error) {
	kind, target, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindSQLite:
		return sqlite.Open(ctx, target)
	default:
		return postgres.Open(ctx, target)
	}
}

// CheckURL returns the error Store would give for the form of url, without
// connecting: nil when url is a sqlite:PATH or postgres:// URL.
func CheckURL(url string) error {
	_, _, err := parseURL(url)
	return err
}

// IsEmbedded reports whether url names the embedded SQLite store, which
// the service migrates by itself on start.
func IsEmbedded(url string) bool {
	return strings.HasPrefix(url, "sqlite:")
}

const (
	kindSQLite   = "sqlite"
	kindPostgres = "postgres"
)

func parseURL(raw string) (kind, target string, err error) {
	switch {
	case raw == "":
		return "", "", quarantine.FieldErrorf(quarantine.EINVALID, "database", "no database URL: use sqlite:PATH or postgres://…")
	case strings.HasPrefix(raw, "sqlite://"):
		return "", "", quarantine.FieldErrorf(quarantine.EINVALID, "database",
			"%q: write SQLite URLs as sqlite:PATH, for example %s or sqlite:/var/lib/quarantine/quarantine.db", redacturl.Database(raw), DefaultURL)
	case strings.HasPrefix(raw, "sqlite:"):
		path := strings.TrimPrefix(raw, "sqlite:")
		if strings.TrimSpace(path) == "" {
			return "", "", quarantine.FieldErrorf(quarantine.EINVALID, "database", "sqlite: needs a file path, for example %s", DefaultURL)
		}
		return kindSQLite, path, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		u, perr := url.Parse(raw)
		if perr != nil || u.Host == "" && !strings.Contains(u.RawQuery, "host=") {
			return "", "", quarantine.FieldErrorf(quarantine.EINVALID, "database", "%q is not a valid PostgreSQL URL (postgres://USER@HOST:PORT/DB)", redacturl.Database(raw))
		}
		return kindPostgres, raw, nil
	}
	return "", "", quarantine.FieldErrorf(quarantine.EINVALID, "database",
		"unsupported database URL %q: use sqlite:PATH or postgres://…", redacturl.Database(raw))
}
