package api_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine/api"
)

// TestSpecMatchesRoutes checks that openapi.yaml and the route table list
// exactly the same routes.
func TestSpecMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is %s, want 3.1", doc.OpenAPI)
	}
	var inSpec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			inSpec = append(inSpec, method+" "+path)
		}
	}
	e := newEnv(t)
	var inServer []string
	h := api.New(apiConfig(e)).Handler()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("Handler is a %T, not a chi router", h)
	}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		inServer = append(inServer, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(inSpec)
	slices.Sort(inServer)
	if !slices.Equal(inSpec, inServer) {
		t.Fatalf("routes differ:\nspec:   %v\nserver: %v", inSpec, inServer)
	}
}

// TestSpecOperationsAreDocumented checks what every operation of the spec
// promises: an operationId, a success response (200, or 201 for a
// creation), problem responses, and 401/403 on the authenticated routes.
func TestSpecOperationsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	id := regexp.MustCompile(`^[a-z][A-Za-z0-9]+$`)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			success := op.Responses.Status(200) != nil || (method == http.MethodPost && op.Responses.Status(201) != nil)
			if !id.MatchString(op.OperationID) || op.Responses.Default() == nil || !success {
				t.Errorf("%s %s: operationId %q, default and 200 (or 201) responses are required", method, path, op.OperationID)
			}
			if strings.HasPrefix(path, "/api/") {
				if op.Security != nil || op.Responses.Status(401) == nil || op.Responses.Status(403) == nil {
					t.Errorf("%s %s: must use the bearer scheme and document 401 and 403", method, path)
				}
			}
		}
	}
	if _, ok := doc.Components.SecuritySchemes["bearer"]; !ok {
		t.Error("no bearer security scheme")
	}
}
