package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine/api"
)

// TestHeaderLimit sends raw requests over a real connection to a server
// built as the service builds it (api.LimitHeaders under an http.Server
// with api.ServerMaxHeaderBytes): a header of exactly api.MaxHeaderBytes
// reaches the API; one byte more is 431 as problem+json naming the
// largest field, with a request id, and the connection is closed; above
// the server's own limit net/http answers 431 itself.
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewUnstartedServer(api.LimitHeaders(api.MaxHeaderBytes)(e.api.Handler()))
	srv.Config.MaxHeaderBytes = api.ServerMaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()

	// raw sends a GET of /api/v1/queues whose header is size bytes, the
	// Authorization field padded to reach it, and reads the answer.
	raw := func(size int) (*http.Response, []byte) {
		t.Helper()
		head := "GET /api/v1/queues HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + e.viewer + "\r\nX-Pad: \r\n\r\n"
		pad := size - len(head)
		if pad < 0 {
			t.Fatalf("size %d below the request's %d", size, len(head))
		}
		req := strings.Replace(head, "X-Pad: ", "X-Pad: "+strings.Repeat("p", pad), 1)
		if len(req) != size {
			t.Fatalf("built %d bytes, want %d", len(req), size)
		}
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b strings.Builder
		if _, err := bufio.NewReader(res.Body).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return res, []byte(b.String())
	}

	if res, body := raw(api.MaxHeaderBytes); res.StatusCode != http.StatusOK {
		t.Fatalf("a header of exactly the limit: %d %s", res.StatusCode, body)
	}
	res, body := raw(api.MaxHeaderBytes + 1)
	var p api.Problem
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || res.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != 431 || p.Field != "X-Pad" || p.Type != api.ProblemTypePrefix+"header_too_large" ||
		p.RequestID == "" || p.RequestID != res.Header.Get("X-Request-Id") || !res.Close {
		t.Fatalf("a header one byte above the limit: %d %q close=%v %s", res.StatusCode, res.Header.Get("Content-Type"), res.Close, body)
	}
	if !strings.Contains(p.Detail, fmt.Sprint(api.MaxHeaderBytes+1)) {
		t.Fatalf("detail %q does not give the size", p.Detail)
	}
	if res, _ := raw(api.ServerMaxHeaderBytes + 8<<10); res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a header above the server's limit: %d", res.StatusCode)
	}
}
