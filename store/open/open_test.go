package open_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/store/open"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url      string
		ok       bool
		embedded bool
	}{
		{open.DefaultURL, true, true},
		{"sqlite:/var/lib/quarantine/q.db", true, true},
		{"sqlite:q.db", true, true},
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", true, false},
		{"postgresql://u:p@db/q", true, false},
		{"sqlite:", false, true},
		{"sqlite://q.db", false, true},
		{"mysql://u:hunter2@db/q", false, false},
		{"host=db dbname=q password=hunter2", false, false},
		{"postgres://", false, false},
		{"", false, false},
	} {
		err := open.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil {
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "database" {
				t.Errorf("CheckURL(%q): %v is not EINVALID naming database", tc.url, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("CheckURL(%q): %v leaks the password", tc.url, err)
			}
		}
		if got := open.IsEmbedded(tc.url); got != tc.embedded {
			t.Errorf("IsEmbedded(%q) = %v", tc.url, got)
		}
	}
}

// openAndUse opens url, migrates, and checks the store works end to end
// through the contract: a token round trip and a verifying audit chain.
func openAndUse(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	s, err := open.Store(ctx, url)
	if err != nil {
		t.Fatalf("Open(%q): %v", redacturl.Database(url), err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	current, latest, err := s.SchemaVersion(ctx)
	if err != nil || current != latest || latest < 1 {
		t.Fatalf("SchemaVersion = %d, %d, %v", current, latest, err)
	}
	secret, hash := quarantine.NewTokenSecret()
	if err := s.CreateToken(ctx, &quarantine.Token{Name: "t", Role: quarantine.RoleViewer, Owners: []string{}, SecretHash: hash}, "test"); err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenBySecretHash(ctx, quarantine.HashTokenSecret(secret))
	if err != nil || got.Name != "t" {
		t.Fatalf("TokenBySecretHash = %+v, %v", got, err)
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK || v.Checked != 1 {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

func TestOpen_SQLite(t *testing.T) {
	t.Parallel()
	openAndUse(t, "sqlite:"+filepath.Join(t.TempDir(), "sub", "q.db"))
}

func TestOpen_Postgres(t *testing.T) {
	t.Parallel()
	openAndUse(t, pgtest.URL(t))
}

func TestOpen_Rejects(t *testing.T) {
	t.Parallel()
	_, err := open.Store(context.Background(), "mysql://u:hunter2@db/q")
	if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "database" || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open of a MySQL URL: %v", err)
	}
}
