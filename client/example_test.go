package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/client"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// A program lists the quarantined messages of a queue with an operator's
// token; an error answer is a *client.Problem.
func Example() {
	ctx := context.Background()
	url, token, stop := exampleServer(ctx)
	defer stop()

	c, err := client.NewClientWithResponses(url, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	_, err = c.IngestWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"envelope":"quarantine.failure/v1",
		"job":{"name":"charge","queue":"billing","idempotency_key":"order-1","payload":{"amount":42}},
		"failure":{"class":"exhausted","reason":"card declined"}}`))
	if err != nil {
		panic(err)
	}
	page, err := c.ListMessagesWithResponse(ctx, &client.ListMessagesParams{Queue: &client.Queue{"billing"}})
	if err != nil {
		panic(err)
	}
	for _, m := range page.JSON200.Items {
		fmt.Println(m.Queue, m.Status, m.Reason)
	}
	missing, err := c.GetMessageWithResponse(ctx, "01JDQ6X7Y8Z9A0B1C2D3E4F5G6", nil)
	if err != nil {
		panic(err)
	}
	var problem error = missing.ApplicationproblemJSON404
	fmt.Println(missing.StatusCode(), strings.SplitN(problem.Error(), ":", 2)[0])
	// Output:
	// billing quarantined card declined
	// 404 Not Found
}

// exampleServer serves the API over a fresh SQLite store and returns its
// URL and an operator's token.
func exampleServer(ctx context.Context) (url, token string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		panic(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "q.db"))
	if err == nil {
		err = st.Migrate(ctx)
	}
	secret, hash := quarantine.NewTokenSecret()
	if err == nil {
		err = st.CreateToken(ctx, &quarantine.Token{Name: "ops", Role: quarantine.RoleOperator, SecretHash: hash}, "example")
	}
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: slog.New(slog.DiscardHandler)}).Handler())
	return srv.URL, secret, func() {
		srv.Close()
		_ = st.Close()
		_ = os.RemoveAll(dir)
	}
}
