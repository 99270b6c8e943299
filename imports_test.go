package quarantine_test

import (
	"go/build"
	"testing"
)

// TestDomainDoesNoIO: the root package holds domain types only. The HTTP
// mapping of its error codes lives in api (ErrorStatus), the stores and
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
