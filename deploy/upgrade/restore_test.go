package upgrade

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// run runs the binary with args and returns its exit status and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(testbin.Path(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// must runs the binary with args and fails t unless it exits 0.
func must(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != 0 {
		t.Fatalf("quarantine %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// head is the audit head `audit verify` prints.
type head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// verification is what `audit verify` prints.
type verification struct {
	OK          bool   `json:"ok"`
	Checked     int64  `json:"checked"`
	Head        head   `json:"head"`
	FirstBadSeq int64  `json:"first_bad_seq"`
	Problem     string `json:"problem"`
}

// verify runs `audit verify` on database, against want when given, and
// returns its exit status and verification.
func verify(t *testing.T, database string, want *head) (int, verification) {
	t.Helper()
	args := []string{"audit", "verify", "--database", database}
	if want != nil {
		args = append(args, "--head-seq", fmt.Sprint(want.Seq), "--head-hash", want.Hash)
	}
	code, out, errOut := run(t, args...)
	var v verification
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("audit verify: exit %d, %v: %s%s", code, err, out, errOut)
	}
	return code, v
}

// events appends n audit events through the binary (token create).
func events(t *testing.T, database, prefix string, n int) {
	t.Helper()
	for i := range n {
		must(t, "token", "create", "--database", database, "--name", fmt.Sprintf("%s-%d", prefix, i), "--role", "viewer")
	}
}

// newDatabase creates a database of the test's own on the test
// PostgreSQL, dropped when the test ends, and returns its URL.
func newDatabase(t *testing.T, prefix string) string {
	t.Helper()
	base := pgtest.BaseURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	pgtest.Exec(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// pgTool returns the path of a PostgreSQL client program (pg_dump,
// pg_restore) of the newest PostgreSQL installed, else the one on PATH.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if p := filepath.Join(dirs[i], name); isExec(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	testenv.Unavailable(t, testenv.PostgresURL, name+" is not installed (Debian postgresql-client)")
	return ""
}

// version is the major version in /usr/lib/postgresql/N/bin.
func version(dir string) int {
	var n int
	fmt.Sscan(filepath.Base(filepath.Dir(dir)), &n)
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// tool runs a program and fails t unless it exits 0.
func tool(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// schemaState is what must not move when migrate runs again: the
// migrations recorded and the audit head.
func schemaState(t *testing.T, database string) (migrations int, h head) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&migrations); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash); err != nil {
		t.Fatal(err)
	}
	return migrations, h
}

// migrate runs `migrate` and returns what it printed.
func migrate(t *testing.T, database string) string {
	t.Helper()
	return strings.TrimSpace(must(t, "migrate", "--database", database))
}

// Upgrade step 2 run twice: the second `migrate` applies nothing, says
// the schema is at the latest version, and moves neither the migrations
// recorded nor the audit head.
func TestMigrateAgainChangesNothing(t *testing.T) {
	t.Parallel()
	db := newDatabase(t, "upg")
	first := migrate(t, db)
	events(t, db, "ci", 2)
	n, h := schemaState(t, db)
	second := migrate(t, db)
	if !strings.HasSuffix(first, second[strings.LastIndex(second, ":"):]) || !strings.Contains(second, "schema at version") {
		t.Errorf("migrate said %q, then %q", first, second)
	}
	var cur, latest int
	if _, err := fmt.Sscanf(second[strings.LastIndex(second, "version"):], "version %d of %d", &cur, &latest); err != nil || cur != latest || cur != n {
		t.Errorf("the second migrate said %q (%v); %d migrations recorded", second, err, n)
	}
	if n2, h2 := schemaState(t, db); n2 != n || h2 != h {
		t.Errorf("migrate again moved the schema: %d migrations, head %+v; before %d, %+v", n2, h2, n, h)
	}
}

// Backup with pg_dump, restore with pg_restore into another database,
// migrate there, then audit verify against the head saved before the
// dump: it passes. A head from after the dump fails it (the backup is
// older), and so does the saved head once the restored copy's last event
// is cut, even though the cut chain, head moved back, verifies on its
// own.
func TestPostgresDumpRestoreVerifiesAgainstSavedHead(t *testing.T) {
	t.Parallel()
	dump, restore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	db := newDatabase(t, "upg")
	migrate(t, db)
	events(t, db, "before", 3)
	code, saved := verify(t, db, nil)
	if code != 0 || !saved.OK || saved.Head.Seq < 3 {
		t.Fatalf("audit verify before the backup: exit %d, %+v", code, saved)
	}
	file := filepath.Join(t.TempDir(), "quarantine.dump")
	tool(t, dump, "--format=custom", "--file="+file, db)
	events(t, db, "after", 1) // after the dump: not in the backup
	_, later := verify(t, db, nil)

	restored := newDatabase(t, "rst")
	tool(t, restore, "--no-owner", "--exit-on-error", "--dbname="+restored, file)
	migrate(t, restored) // grants again; nothing to apply
	if code, v := verify(t, restored, &saved.Head); code != 0 || !v.OK || v.Head != saved.Head {
		t.Fatalf("the restored database against the saved head: exit %d, %+v (saved %+v)", code, v, saved.Head)
	}
	if code, v := verify(t, restored, &later.Head); code != 1 || v.OK {
		t.Errorf("a head from after the dump verified on the backup: exit %d, %+v", code, v)
	}

	// Cut the last event as the tables' owner would have to: triggers
	// off, the row deleted, the head moved back to the event before.
	pgtest.Exec(t, restored, `ALTER TABLE audit_log DISABLE TRIGGER USER;
		ALTER TABLE audit_head DISABLE TRIGGER USER;
		DELETE FROM audit_log WHERE seq = (SELECT max(seq) FROM audit_log);
		UPDATE audit_head SET (seq, hash) = (SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1) WHERE id = 1;
		ALTER TABLE audit_log ENABLE TRIGGER USER;
		ALTER TABLE audit_head ENABLE TRIGGER USER`)
	if code, v := verify(t, restored, nil); code != 0 || !v.OK || v.Head.Seq != saved.Head.Seq-1 {
		t.Fatalf("the cut chain on its own: exit %d, %+v (want it to look whole at seq %d)", code, v, saved.Head.Seq-1)
	}
	if code, v := verify(t, restored, &saved.Head); code != 1 || v.OK || v.Problem == "" {
		t.Errorf("the cut chain against the saved head: exit %d, %+v, want a failure", code, v)
	}
}

// The embedded store copied online (VACUUM INTO while serve runs on it)
// verifies against the head saved before the copy; the copy with its
// last event cut does not.
func TestSQLiteBackupVerifiesAgainstSavedHead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "quarantine.db")
	events(t, db, "before", 3)
	config := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\n", db)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testbin.Serve(t, testbin.Path(t), config)
	code, saved := verify(t, db, nil)
	if code != 0 || !saved.OK || saved.Head.Seq < 3 {
		t.Fatalf("audit verify before the backup: exit %d, %+v", code, saved)
	}
	backup := filepath.Join(dir, "backup.db")
	exec1 := func(path string, stmts ...string) {
		t.Helper()
		sdb, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		for _, s := range stmts {
			if _, err := sdb.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	exec1(filepath.Join(dir, "quarantine.db"), "VACUUM INTO '"+backup+"'")
	p.Kill()
	if code, v := verify(t, "sqlite:"+backup, &saved.Head); code != 0 || !v.OK || v.Head != saved.Head {
		t.Fatalf("the backup against the saved head: exit %d, %+v (saved %+v)", code, v, saved.Head)
	}
	exec1(backup,
		"DROP TRIGGER audit_log_no_delete",
		"DELETE FROM audit_log WHERE seq = (SELECT max(seq) FROM audit_log)",
		"UPDATE audit_head SET seq = (SELECT max(seq) FROM audit_log), hash = (SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1) WHERE id = 1")
	if code, v := verify(t, "sqlite:"+backup, nil); code != 0 || !v.OK {
		t.Fatalf("the cut chain on its own: exit %d, %+v (want it to look whole)", code, v)
	}
	if code, v := verify(t, "sqlite:"+backup, &saved.Head); code != 1 || v.OK {
		t.Errorf("the cut chain against the saved head: exit %d, %+v, want a failure", code, v)
	}
}
