package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// MaxHeaderBytes is the documented limit of a request's header: its
// request line and header fields together, counted as they are sent.
// Above it LimitHeaders answers 431 as problem+json.
const MaxHeaderBytes = 64 << 10

// ServerMaxHeaderBytes is the http.Server MaxHeaderBytes to serve
// LimitHeaders with: a header up to it reaches the handler, which refuses
// one above MaxHeaderBytes as problem+json. Above it net/http answers 431
// itself, in plain text, before any handler runs: the server must not
// read headers of any size.
const ServerMaxHeaderBytes = 1 << 20

// LimitHeaders answers 431 Request Header Fields Too Large, as
// problem+json naming the largest header field, to a request whose
// header is above limit bytes (MaxHeaderBytes in the service), and closes
// the connection; other requests go to next. Serve it with an
// http.Server whose MaxHeaderBytes is larger (ServerMaxHeaderBytes).
func LimitHeaders(limit int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, largest := headerBytes(r)
			if n <= limit {
				next.ServeHTTP(w, r)
				return
			}
			id := r.Header.Get(RequestIDHeader)
			if !saneRequestID(id) {
				id = newRequestID()
			}
			h := w.Header()
			h.Set(RequestIDHeader, id)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Connection", "close")
			r = r.WithContext(context.WithValue(r.Context(), keyRequestID, id))
			writeProblem(w, r, http.StatusRequestHeaderFieldsTooLarge, "header_too_large",
				"the request's header is "+strconv.Itoa(n)+" bytes, above the limit of "+strconv.Itoa(limit)+
					" (its largest field is "+quarantine.Clip(largest)+")", quarantine.Clip(largest))
		})
	}
}

// headerBytes is the size of r's request line and header fields as the
// client sent them (each field "Name: value\r\n"; Host is held apart by
// net/http), and the name of the largest field.
func headerBytes(r *http.Request) (n int, largest string) {
	n = len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	most := -1
	for k, vs := range r.Header {
		size := 0
		for _, v := range vs {
			size += len(k) + 2 + len(v) + 2
		}
		n += size
		if size > most || (size == most && k < largest) {
			most, largest = size, k
		}
	}
	return n + 2, largest
}
