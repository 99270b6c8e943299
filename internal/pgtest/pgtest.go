package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// EnvURL names the environment variable that points at the test database
// (scripts/services.sh records the project's private PostgreSQL in it;
// see internal/testenv).
const EnvURL = testenv.PostgresURL

// BaseURL returns the test database URL (EnvURL), without a schema. It
// skips tb when there is none or the database does not answer, or fails
// it when the environment has CI=true.
func BaseURL(tb testing.TB) string {
	tb.Helper()
	u := envURL(tb)
	conn := connect(tb, u)
	conn.Close(context.Background())
	return u
}

func envURL(tb testing.TB) string {
	tb.Helper()
	return testenv.Require(tb, EnvURL, "PostgreSQL")
}

// URL creates a fresh schema t_<random>, drops it (with everything in it)
// when tb ends, and returns the test database URL with search_path set to
// that schema. It skips or fails tb like BaseURL.
func URL(tb testing.TB) string {
	tb.Helper()
	base := envURL(tb)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	exec(tb, base, "CREATE SCHEMA "+schema)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(tb, base, schema)
}

var reSchema = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// PersistentURL creates schema name if it does not exist and returns the
// test database URL with search_path set to it. The schema is kept after
// the test: benchmarks use it to seed a large data set once per machine.
// name must be a lower-case SQL identifier.
func PersistentURL(tb testing.TB, name string) string {
	tb.Helper()
	if !reSchema.MatchString(name) {
		tb.Fatalf("pgtest: %q is not a lower-case SQL identifier", name)
	}
	base := envURL(tb)
	exec(tb, base, "CREATE SCHEMA IF NOT EXISTS "+name)
	return WithSearchPath(tb, base, name)
}

// WithSearchPath returns the postgres:// URL u with its search_path
// runtime parameter set to schema.
func WithSearchPath(tb testing.TB, u, schema string) string {
	tb.Helper()
	p, err := url.Parse(u)
	if err != nil || !strings.HasPrefix(p.Scheme, "postgres") {
		tb.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}
	q := p.Query()
	q.Set("search_path", schema)
	p.RawQuery = q.Encode()
	return p.String()
}

// connect opens one connection to u, or skips (fails under CI=true) tb.
func connect(tb testing.TB, u string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err == nil {
		err = conn.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("pgtest: PostgreSQL is required under CI=true but %s does not answer: %v", EnvURL, err)
		}
		tb.Skipf("pgtest: PostgreSQL does not answer (set %s): %v", EnvURL, err)
	}
	return conn
}

func exec(tb testing.TB, u, sql string) {
	tb.Helper()
	conn := connect(tb, u)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		tb.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// Role creates a login role named prefix_<random>, with no other
// attribute (not a superuser, creates no database or role), and returns
// its name. When tb ends, what the role owns in the test database is
// dropped and its privileges revoked (DROP OWNED), then the role. Roles
// are cluster-wide: the random suffix keeps parallel tests apart. prefix
// must be a short lower-case SQL identifier. It skips or fails tb like
// BaseURL.
func Role(tb testing.TB, prefix string) string {
	tb.Helper()
	if !reSchema.MatchString(prefix) || len(prefix) > 40 {
		tb.Fatalf("pgtest: %q is not a short lower-case SQL identifier", prefix)
	}
	base := envURL(tb)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	exec(tb, base, "CREATE ROLE "+name+" LOGIN")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("pgtest: drop role %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		for _, q := range []string{"DROP OWNED BY " + name + " CASCADE", "DROP ROLE " + name} {
			if _, err := conn.Exec(ctx, q); err != nil {
				tb.Errorf("pgtest: %s: %v", q, err)
				return
			}
		}
	})
	return name
}

// WithUser returns the postgres:// URL u connecting as role, without a
// password (the test database trusts loopback connections).
func WithUser(tb testing.TB, u, role string) string {
	tb.Helper()
	p, err := url.Parse(u)
	if err != nil || !strings.HasPrefix(p.Scheme, "postgres") {
		tb.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}
	p.User = url.User(role)
	return p.String()
}

// Exec runs sql on the test database (u, as its user) and fails tb on
// error.
func Exec(tb testing.TB, u, sql string) {
	tb.Helper()
	exec(tb, u, sql)
}
