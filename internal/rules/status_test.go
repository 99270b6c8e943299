package rules_test

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

func TestErrorStatus(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		quarantine.EINVALID: 400, quarantine.EUNAUTHORIZED: 401, quarantine.EFORBIDDEN: 403, quarantine.ENOTFOUND: 404,
		quarantine.ECONFLICT: 409, quarantine.EPRECONDITION: 412, quarantine.ETOOLARGE: 413, quarantine.EUNPROCESSABLE: 422,
		quarantine.EINTERNAL: 500, quarantine.EUNAVAILABLE: 503, "nonsense": 500,
	}
	for code, want := range cases {
		if got := rules.ErrorStatus(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}
