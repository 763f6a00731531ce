package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/demo"
)

var echoParam = regexp.MustCompile(`:([a-z]+)`)

// TestOpenAPICoversEveryRoute keeps api/openapi.json true: every route the
// server registers (cron routes included) is in it, and it documents no
// route the server lacks.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	// The demo's routes too, as `chronoq demo` registers them.
	pool, err := demo.New(demo.Config{Client: b.client})
	require.NoError(t, err)
	srv, err := api.New(api.Config{Store: b.client, Cron: &memCron{client: b.client}, Routes: pool.Routes()})
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))

	var registered []string
	for _, r := range srv.Echo().Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		path := echoParam.ReplaceAllString(r.Path, "{$1}")
		op := strings.ToLower(r.Method) + " " + path
		registered = append(registered, op)
		require.Contains(t, doc.Paths, path, "route %s %s is not in api/openapi.json", r.Method, r.Path)
		require.Contains(t, doc.Paths[path], strings.ToLower(r.Method), "route %s %s is not in api/openapi.json", r.Method, r.Path)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			require.True(t, slices.Contains(registered, method+" "+path), "api/openapi.json documents %s %s, which the server does not serve", method, path)
		}
	}
	require.Len(t, registered, 34)

	// Served as is.
	r := b.do(t, http.MethodGet, "/v1/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, api.OpenAPI(), r.body)
}

// TestOpenAPIRefsResolve checks that every $ref names a component.
func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	comps := doc["components"].(map[string]any)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				require.Len(t, parts, 2, ref)
				group, ok := comps[parts[0]].(map[string]any)
				require.True(t, ok, ref)
				require.Contains(t, group, parts[1], ref)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}
