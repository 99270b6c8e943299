package redacturl

import (
	"strings"
	"testing"
)

func TestDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://quarantine:hunter2@db:5432/q?sslmode=disable", "postgres://quarantine:<secret>@db:5432/q?sslmode=disable"},
		{"postgresql://u:p%40ss@db/q", "postgresql://u:<secret>@db/q"},
		{"postgres://postgres@127.0.0.1:5432/test", "postgres://postgres@127.0.0.1:5432/test"},
		{"postgres://db/q?user=u&password=hunter2&sslmode=require", "postgres://db/q?user=u&password=<secret>&sslmode=require"},
		{"host=db user=u password=hunter2 dbname=q", "host=db user=u password=<secret> dbname=q"},
		{"host=db password='hun ter2' dbname=q", "host=db password=<secret> dbname=q"},
		{"postgres://u:hunter2%zz@db/q", "postgres://u:<secret>@db/q"},
		{"sqlite:./quarantine-data/quarantine.db", "sqlite:./quarantine-data/quarantine.db"},
		{"", ""},
	} {
		if got := Database(tc.in); got != tc.want {
			t.Errorf("Database(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(Database(tc.in), "hunter2") || strings.Contains(Database(tc.in), "hun ter2") {
			t.Errorf("Database(%q) leaks the password", tc.in)
		}
	}
}
