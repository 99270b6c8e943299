package migrate

import (
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
