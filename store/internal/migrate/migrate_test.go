package migrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func files(names ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, n := range names {
		fsys["m/"+n] = &fstest.MapFile{Data: []byte("-- " + n)}
	}
	return fsys
}

func TestLoad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files []string
		err   string // "" for success
	}{
		{"in order", []string{"0002_b.sql", "0001_a.sql", "0003_c.sql"}, ""},
		{"a gap", []string{"0001_a.sql", "0003_c.sql"}, `migration "0003_c.sql": want number 2`},
		{"not from 1", []string{"0002_b.sql"}, `want number 1`},
		{"a repeat", []string{"0001_a.sql", "0002_b.sql", "0002_c.sql"}, "both numbered 2"},
		{"zero", []string{"0000_a.sql", "0001_b.sql"}, "not named NNNN_name.sql"},
		{"no number", []string{"init.sql"}, "not named NNNN_name.sql"},
		{"not sql", []string{"0001_a.txt"}, "not named NNNN_name.sql"},
		{"no name", []string{"0001_.sql"}, "not named NNNN_name.sql"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ms, err := Load(files(c.files...), "m")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Load: %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != len(c.files) || Latest(ms) != len(c.files) {
				t.Fatalf("%d migrations, latest %d, want %d", len(ms), Latest(ms), len(c.files))
			}
			for i, m := range ms {
				if m.Version != i+1 || m.SQL != "-- "+m.Name {
					t.Fatalf("migration %d: %+v", i, m)
				}
			}
		})
	}
}

// memDB is a database whose transactions are recorded: what each one ran
// is kept only when it committed.
type memDB struct {
	applied map[int]bool
	ran     []string // SQL of committed migrations
	fail    string   // SQL that fails
	txs     int
}

type memTx struct {
	db       *memDB
	prepared bool
	ran      []string
	recorded []int
}

func (t *memTx) Prepare(context.Context) error { t.prepared = true; return nil }
func (t *memTx) Applied(_ context.Context, v int) (bool, error) {
	if !t.prepared {
		return false, errors.New("schema_migrations read before Prepare")
	}
	return t.db.applied[v], nil
}
func (t *memTx) Exec(_ context.Context, sql string) error {
	if sql == t.db.fail {
		return errors.New("syntax error")
	}
	t.ran = append(t.ran, sql)
	return nil
}
func (t *memTx) Record(_ context.Context, v int, _ bool) error {
	t.recorded = append(t.recorded, v)
	return nil
}

func (db *memDB) inTx(_ string, fn func(Tx) error) error {
	db.txs++
	tx := &memTx{db: db}
	if err := fn(tx); err != nil {
		return err // rolled back
	}
	db.ran = append(db.ran, tx.ran...)
	for _, v := range tx.recorded {
		db.applied[v] = true
	}
	return nil
}

func TestApply(t *testing.T) {
	t.Parallel()
	ms := []Migration{{Version: 1, Name: "0001_a.sql", SQL: "a"}, {Version: 2, Name: "0002_b.sql", SQL: "b"}, {Version: 3, Name: "0003_c.sql", SQL: "c"}}
	db := &memDB{applied: map[int]bool{1: true}, fail: "c"}
	err := Apply(context.Background(), ms, db.inTx)
	if err == nil || !strings.Contains(err.Error(), "0003_c.sql") {
		t.Fatalf("Apply: %v, want the failing migration named", err)
	}
	if strings.Join(db.ran, ",") != "b" || !db.applied[2] || db.applied[3] || db.txs != 3 {
		t.Fatalf("ran %v, applied %v in %d transactions: want b alone, one transaction each", db.ran, db.applied, db.txs)
	}
	db.fail = ""
	if err := Apply(context.Background(), ms, db.inTx); err != nil {
		t.Fatal(err)
	}
	if err := Apply(context.Background(), ms, db.inTx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(db.ran, ",") != "b,c" || len(db.applied) != 3 {
		t.Fatalf("ran %v, applied %v: want each migration once", db.ran, db.applied)
	}
}

func TestIsContract(t *testing.T) {
	if !IsContract("-- 0031: drop the old column\n  -- contract: 0030 stopped reading it\nALTER TABLE t DROP COLUMN c;") {
		t.Fatal("a -- contract: line is not a contract")
	}
	if IsContract("-- 0031: add a column; no contract here\nALTER TABLE t ADD COLUMN c text;") {
		t.Fatal("an expanding migration counts as a contract")
	}
}
