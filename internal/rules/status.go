package rules

import (
	"net/http"

	"github.com/quarantine-dev/quarantine"
)

// codeStatus is the one table from domain error codes to HTTP statuses.
var codeStatus = map[string]int{
	quarantine.EINVALID:       http.StatusBadRequest,
	quarantine.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	quarantine.ENOTFOUND:      http.StatusNotFound,
	quarantine.ECONFLICT:      http.StatusConflict,
	quarantine.EPRECONDITION:  http.StatusPreconditionFailed,
	quarantine.ETOOLARGE:      http.StatusRequestEntityTooLarge,
	quarantine.EUNAUTHORIZED:  http.StatusUnauthorized,
	quarantine.EFORBIDDEN:     http.StatusForbidden,
	quarantine.EUNAVAILABLE:   http.StatusServiceUnavailable,
	quarantine.EINTERNAL:      http.StatusInternalServerError,
}

// ErrorStatus maps a domain error code (quarantine.ErrorCode) to its HTTP
// status: the one table used by the REST API and the web UI. An unknown
// code is 500.
func ErrorStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
