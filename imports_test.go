package quarantine_test

import (
	"go/build"
	"slices"
	"testing"
)

// TestDomainDoesNoIO: the root package holds domain types only. The HTTP
// mapping of its error codes lives in internal/rules (ErrorStatus), the stores and
// brokers in their own packages.
func TestDomainDoesNoIO(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{"net": true, "net/http": true, "database/sql": true, "os": true, "os/exec": true}
	for _, imp := range pkg.Imports {
		if forbidden[imp] {
			t.Errorf("the domain package imports %s", imp)
		}
	}
}

// TestLayering: the rules the REST API and the web UI share live below
// both (internal/rules): neither transport imports the other, and the
// rules import neither. A package's tests count too.
func TestLayering(t *testing.T) {
	t.Parallel()
	const mod = "github.com/quarantine-dev/quarantine/"
	for dir, forbidden := range map[string][]string{
		"web":            {mod + "api"},
		"api":            {mod + "web"},
		"internal/rules": {mod + "api", mod + "web"},
	} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		imports := append(append(slices.Clone(pkg.Imports), pkg.TestImports...), pkg.XTestImports...)
		for _, f := range forbidden {
			if slices.Contains(imports, f) {
				t.Errorf("%s imports %s", dir, f)
			}
		}
	}
}
