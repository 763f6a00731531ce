package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/api/apitest"
	"github.com/chronoq/chronoq/demo"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/workflow"
)

var echoParam = regexp.MustCompile(`:([a-z]+)`)

// openAPIDoc is the part of an OpenAPI document the tests read.
type openAPIDoc struct {
	OpenAPI  string                                `json:"openapi"`
	Security []map[string][]string                 `json:"security"`
	Paths    map[string]map[string]json.RawMessage `json:"paths"`
}

func parseDoc(t *testing.T, b []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(b, &doc))
	return doc
}

// operations are "get /v1/queues/{queue}" of every operation of doc.
func (doc openAPIDoc) operations() []string {
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				ops = append(ops, method+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPICoversEveryRoute keeps the served document true: it lists
// every route the server registers and no other, for each way the server
// can be configured (`chronoq serve`, `chronoq demo`, the api package
// without a cron store or a token).
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	pool, err := demo.New(demo.Config{Client: b.client})
	require.NoError(t, err)
	reg, err := registry.New(b.client, registry.Config{})
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		cfg  api.Config
		ops  int
	}{
		{"serve", api.Config{Store: b.client, Cron: &memCron{client: b.client}, Workers: reg, Token: "t"}, 53},
		{"serve without a token", api.Config{Store: b.client, Cron: &memCron{client: b.client}, Workers: reg}, 53},
		{"demo", api.Config{Store: b.client, Cron: &memCron{client: b.client}, Workers: reg, Token: "t",
			Routes: pool.Routes(), RoutesOpenAPI: demo.OpenAPI()}, 56},
		{"no cron store", api.Config{Store: b.client, Workers: reg, Token: "t", MetricsAuth: true}, 48},
		{"no worker registry", api.Config{Store: b.client, Cron: &memCron{client: b.client}, Token: "t"}, 49},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := api.New(tt.cfg)
			require.NoError(t, err)
			served := srv.OpenAPI()
			_, err = apitest.Load(served) // a valid OpenAPI document
			require.NoError(t, err)
			doc := parseDoc(t, served)
			require.Equal(t, "3.0.3", doc.OpenAPI)

			var registered []string
			for _, r := range srv.Echo().Routes() {
				if r.Method != echo.RouteNotFound {
					registered = append(registered, strings.ToLower(r.Method)+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
				}
			}
			slices.Sort(registered)
			require.Equal(t, registered, doc.operations(), "the served document lists the routes the server serves")
			require.Len(t, registered, tt.ops)
		})
	}
}

// TestOpenAPIServedFitsTheServer: `chronoq serve --token` serves
// api/openapi.json as it is; the demo's operations are only in the
// document of a server that has them; credentials are asked for only
// where the server needs them.
func TestOpenAPIServedFitsTheServer(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	pool, err := demo.New(demo.Config{Client: b.client})
	require.NoError(t, err)
	reg, err := registry.New(b.client, registry.Config{})
	require.NoError(t, err)
	newSrv := func(cfg api.Config) openAPIDoc {
		cfg.Store, cfg.Cron, cfg.Workers = b.client, &memCron{client: b.client}, reg
		srv, err := api.New(cfg)
		require.NoError(t, err)
		return parseDoc(t, srv.OpenAPI())
	}
	metricsSecurity := func(doc openAPIDoc) []map[string][]string {
		var op struct {
			Security []map[string][]string `json:"security"`
		}
		require.NoError(t, json.Unmarshal(doc.Paths["/metrics"]["get"], &op))
		return op.Security
	}
	bearer := []map[string][]string{{"bearer": {}}, {"session": {}}}

	wf, err := workflow.New(workflow.Config{Queue: b.client})
	require.NoError(t, err)
	srv, err := api.New(api.Config{Store: b.client, Cron: &memCron{client: b.client}, Push: dispatch.NewStore(b.client, dispatch.Guard{}),
		Hooks:     dispatch.NewHooks(b.client, dispatch.Guard{}),
		Workflows: wf, Workers: reg, Token: "t"})
	require.NoError(t, err)
	require.Equal(t, api.OpenAPI(), srv.OpenAPI(), "serve --token serves api/openapi.json byte for byte")
	doc := parseDoc(t, srv.OpenAPI())
	require.NotContains(t, doc.Paths, "/v1/demo")
	require.Equal(t, bearer, doc.Security)
	require.Empty(t, metricsSecurity(doc), "/metrics is open")

	doc = newSrv(api.Config{Token: "t", Routes: pool.Routes(), RoutesOpenAPI: demo.OpenAPI()})
	for _, p := range []string{"/v1/demo", "/v1/demo/pool", "/v1/demo/batch"} {
		require.Contains(t, doc.Paths, p)
	}

	doc = newSrv(api.Config{Token: "t", MetricsAuth: true})
	require.Nil(t, metricsSecurity(doc), "--metrics-auth: /metrics needs the token")

	doc = newSrv(api.Config{})
	require.Equal(t, []map[string][]string{{}}, doc.Security, "no token: nothing needs credentials, the empty requirement")
	require.Empty(t, metricsSecurity(doc))

	// The document over HTTP is the server's.
	r := b.do(t, http.MethodGet, "/v1/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, b.srv.OpenAPI(), r.body)

	// Routes documented twice, or a fragment that is not one, are refused.
	for _, bad := range []string{`{"paths": {"/v1/jobs": {"post": {}}}}`, `{"servers": []}`, `[]`} {
		_, err := api.New(api.Config{Store: b.client, RoutesOpenAPI: []byte(bad)})
		require.Error(t, err, bad)
	}
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

type schemaDoc struct {
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"schemas"`
	} `json:"components"`
}

// TestOpenAPIClaimedJobIsJobAndToken: a claimed job is the Job resource
// and its token, no more, no less (both are closed objects, so neither
// can be written as the other plus a field).
func TestOpenAPIClaimedJobIsJobAndToken(t *testing.T) {
	t.Parallel()
	var doc schemaDoc
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	job, claimed := doc.Components.Schemas["Job"], doc.Components.Schemas["ClaimedJob"]
	require.Contains(t, claimed.Properties, "token")
	props := maps.Clone(claimed.Properties)
	delete(props, "token")
	require.Equal(t, job.Properties, props)
	require.ElementsMatch(t, append(slices.Clone(job.Required), "token"), claimed.Required)
}

// TestOpenAPIDefaultsAreNotRequired: a request field with a default may be
// left out.
func TestOpenAPIDefaultsAreNotRequired(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{api.OpenAPI(), demo.OpenAPI()} {
		var doc schemaDoc
		require.NoError(t, json.Unmarshal(b, &doc))
		for name, s := range doc.Components.Schemas {
			for field, raw := range s.Properties {
				var p map[string]any
				require.NoError(t, json.Unmarshal(raw, &p))
				if _, ok := p["default"]; ok {
					require.NotContains(t, s.Required, field, "%s.%s has a default", name, field)
				}
			}
		}
	}
}
