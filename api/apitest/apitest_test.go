package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api/apitest"
)

const doc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "servers": [{"url": "/"}],
  "security": [{"bearer": []}],
  "paths": {
    "/things/{id}": {
      "post": {
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[a-z]+$"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
          "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}}}},
        "responses": {
          "200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
          "202": {"description": "accepted, no content"},
          "400": {"description": "bad", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        }
      }
    },
    "/things/special": {
      "post": {
        "responses": {"201": {"description": "made", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}
      }
    },
    "/stream": {
      "get": {
        "responses": {"200": {"description": "events", "content": {"text/event-stream": {"schema": {
          "type": "object", "properties": {"event": {"type": "string", "enum": ["tick"]}, "data": {"$ref": "#/components/schemas/Thing"}},
          "required": ["event", "data"], "additionalProperties": false}}}}}
      }
    }
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "schemas": {
      "Thing": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false},
      "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"], "additionalProperties": false}
    }
  }
}`

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

// TestTransport: the transport passes conforming exchanges and reports
// every kind of mismatch as a test error.
func TestTransport(t *testing.T) {
	t.Parallel()
	// The server answers what the test's header X-Answer says: "status
	// content-type body", "-" for no content type.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f := append(strings.SplitN(r.Header.Get("X-Answer"), " ", 3), "")
		var code int
		_, _ = fmt.Sscan(f[0], &code)
		if f[1] != "-" {
			w.Header().Set("Content-Type", f[1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, f[2])
	}))
	t.Cleanup(hs.Close)

	for _, tt := range []struct {
		name, method, path, body, auth, answer string
		fails                                  bool
	}{
		{"conforming", "POST", "/things/ab", `{"n":1}`, "Bearer x", `200 application/json {"n":2}`, false},
		{"no content", "POST", "/things/ab", `{"n":1}`, "Bearer x", `202 -`, false},
		{"bad input answered 400", "POST", "/things/ab", `{"n":"one"}`, "Bearer x", `400 application/json {"error":"n"}`, false},
		{"no credentials answered 400", "POST", "/things/ab", `{"n":1}`, "", `400 application/json {"error":"who"}`, false},
		{"unknown path answered 404", "GET", "/nothing", ``, "Bearer x", `404 application/json {"error":"none"}`, false},
		{"undocumented status", "POST", "/things/ab", `{"n":1}`, "Bearer x", `409 application/json {"error":"x"}`, true},
		{"body off the schema", "POST", "/things/ab", `{"n":1}`, "Bearer x", `200 application/json {"n":2,"m":3}`, true},
		{"wrong content type", "POST", "/things/ab", `{"n":1}`, "Bearer x", `200 text/plain {"n":2}`, true},
		{"body where none is documented", "POST", "/things/ab", `{"n":1}`, "Bearer x", `202 - oops`, true},
		{"bad input accepted", "POST", "/things/ab", `{"n":1,"x":2}`, "Bearer x", `200 application/json {"n":2}`, true},
		{"bad path parameter accepted", "POST", "/things/AB", `{"n":1}`, "Bearer x", `200 application/json {"n":2}`, true},
		{"no credentials accepted", "POST", "/things/ab", `{"n":1}`, "", `200 application/json {"n":2}`, true},
		{"unknown path answered 200", "GET", "/nothing", ``, "Bearer x", `200 application/json {"n":2}`, true},
		{"unknown path answered without the Error body", "GET", "/nothing", ``, "Bearer x", `404 application/json {}`, true},
		{"trailing slash answered 404", "POST", "/things/ab/", `{"n":1}`, "Bearer x", `404 application/json {"error":"none"}`, false},
		{"trailing slash answered 200", "POST", "/things/ab/", `{"n":1}`, "Bearer x", `200 application/json {"n":2}`, true},
		{"escaped literal answered 404", "POST", "/thing%73/ab", `{"n":1}`, "Bearer x", `404 application/json {"error":"none"}`, false},
		{"empty path parameter answered 404", "POST", "/things/", `{"n":1}`, "Bearer x", `404 application/json {"error":"none"}`, false},
		{"encoded slash in a parameter answered 400", "POST", "/things/a%2Fb", `{"n":1}`, "Bearer x", `400 application/json {"error":"id"}`, false},
		{"a literal segment before a parameter", "POST", "/things/special", ``, "Bearer x", `201 application/json {"n":1}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			client := &http.Client{}
			apitest.Wrap(rec, client, []byte(doc))
			req, err := http.NewRequestWithContext(t.Context(), tt.method, hs.URL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			req.Header.Set("X-Answer", tt.answer)
			res, err := client.Do(req)
			require.NoError(t, err)
			// The body reaches the test intact.
			got, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.NoError(t, res.Body.Close())
			require.Equal(t, append(strings.SplitN(tt.answer, " ", 3), "")[2], string(got))
			if tt.fails {
				require.Len(t, rec.errs, 1, "the mismatch is reported")
			} else {
				require.Empty(t, rec.errs)
			}
		})
	}
}

// TestTransportStream: each message of an event stream is checked as the
// test reads it.
func TestTransportStream(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": hello\n\nevent: tick\ndata: {\"n\":1}\n\nevent: tock\ndata: {\"n\":2}\n\nevent: tick\ndata: {\"n\":\"x\"}\n\n")
	}))
	t.Cleanup(hs.Close)
	rec := &recorder{TB: t}
	client := &http.Client{}
	apitest.Wrap(rec, client, []byte(doc))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, hs.URL+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer x")
	res, err := client.Do(req)
	require.NoError(t, err)
	require.Empty(t, rec.errs, "the head conforms")
	_, err = io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Len(t, rec.errs, 2, "the tock and the tick whose n is a string: %q", rec.errs)
}
