package pgtest_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
)

func TestURLIsolatesAndDropsSchema(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("inner", func(t *testing.T) {
		u := pgtest.URL(t)
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		schema = p.Query().Get("search_path")
		if !strings.HasPrefix(schema, "t_") {
			t.Fatalf("search_path = %q, want t_<random>", schema)
		}
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), "CREATE TABLE probe (x int)"); err != nil {
			t.Fatal(err)
		}
		var where string
		if err := conn.QueryRow(t.Context(), "SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe' AND table_schema = current_schema()").Scan(&where); err != nil {
			t.Fatal(err)
		}
		if where != schema {
			t.Fatalf("table created in %q, want %q", where, schema)
		}
		if other := pgtest.URL(t); other == u {
			t.Fatal("two calls returned the same schema")
		}
	})
	conn, err := pgx.Connect(t.Context(), pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists after the test ended", schema)
	}
}

func TestWithSearchPathKeepsOtherParameters(t *testing.T) {
	t.Parallel()
	got := pgtest.WithSearchPath(t, "postgres://u@h:5432/db?sslmode=disable&search_path=old", "t_x")
	p, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if q := p.Query(); q.Get("search_path") != "t_x" || q.Get("sslmode") != "disable" || p.Path != "/db" || p.Host != "h:5432" {
		t.Fatalf("WithSearchPath = %s", got)
	}
}

// recorder is a testing.TB that records how a helper ended the test.
type recorder struct {
	testing.TB
	ended string
}

type stop struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.ended = "fatal"
	panic(stop{})
}
func (r *recorder) Skipf(format string, args ...any) {
	r.ended = "skip"
	panic(stop{})
}

func endOf(t *testing.T) string {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stop); !ok {
					panic(v)
				}
			}
		}()
		pgtest.BaseURL(r)
	}()
	return r.ended
}

// TestUnreachableSkipsOrFailsUnderCI: a missing database skips a test on
// a laptop and fails it in CI.
func TestUnreachableSkipsOrFailsUnderCI(t *testing.T) {
	t.Setenv(pgtest.EnvURL, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	t.Setenv("CI", "")
	if got := endOf(t); got != "skip" {
		t.Fatalf("without CI: %q, want skip", got)
	}
	t.Setenv("CI", "true")
	if got := endOf(t); got != "fatal" {
		t.Fatalf("with CI=true: %q, want fatal", got)
	}
}
