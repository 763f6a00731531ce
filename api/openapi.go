package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI is the OpenAPI 3 document of the API (api/openapi.json): every
// route of a server with a token and a cron store. What a server serves
// at /v1/openapi.json is this document fitted to its configuration: see
// [Server.OpenAPI].
func OpenAPI() []byte { return openAPIDoc }

// OpenAPI is the document the server serves at /v1/openapi.json:
// [OpenAPI] with Config.RoutesOpenAPI merged in, and fitted to the
// server, so that it lists exactly the operations the server serves and
// the credentials it asks for. Without a cron store the /v1/cron
// operations are left out; without a token no operation needs
// credentials; with Config.MetricsAuth, /metrics needs the token like the
// API. A server configured as `chronoq serve --token` is, serves
// api/openapi.json byte for byte.
func (s *Server) OpenAPI() []byte { return s.doc }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, s.doc)
}

// openAPIMethods are the operations of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// buildOpenAPI makes the served document (see [Server.OpenAPI]).
func (s *Server) buildOpenAPI() ([]byte, error) {
	doc, err := decodeDoc(openAPIDoc)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	changed := false
	if len(s.cfg.RoutesOpenAPI) > 0 {
		extra, err := decodeDoc(s.cfg.RoutesOpenAPI)
		if err != nil {
			return nil, fmt.Errorf("api: Config.RoutesOpenAPI: %w", err)
		}
		if err := mergeDoc(doc, extra); err != nil {
			return nil, fmt.Errorf("api: Config.RoutesOpenAPI: %w", err)
		}
		changed = true
	}

	served := map[string]bool{} // "get /v1/queues/{queue}"
	for _, r := range s.e.Routes() {
		if r.Method != echo.RouteNotFound {
			served[strings.ToLower(r.Method)+" "+echoParam(r.Path)] = true
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	for path, v := range paths {
		item, _ := v.(map[string]any)
		for _, m := range openAPIMethods {
			if _, ok := item[m]; ok && !served[m+" "+path] {
				delete(item, m)
				changed = true
			}
		}
		if !slices.ContainsFunc(openAPIMethods, func(m string) bool { _, ok := item[m]; return ok }) {
			delete(paths, path)
		}
	}

	if s.cfg.Token == "" {
		// Nothing asks for credentials: the one requirement is the empty
		// one, said at the root so that every operation has its security
		// defined (an operation without any, at the root or its own, is
		// an error by Redocly's recommended rules).
		doc["security"] = []any{map[string]any{}}
		for _, v := range paths {
			for _, m := range openAPIMethods {
				if op, ok := v.(map[string]any)[m].(map[string]any); ok {
					delete(op, "security")
				}
			}
		}
		changed = true
	} else if s.cfg.MetricsAuth {
		if op, ok := getPath(doc, "paths", "/metrics", "get").(map[string]any); ok {
			delete(op, "security") // the document's, the token's
			changed = true
		}
	}
	if !changed {
		return openAPIDoc, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// echoParam writes Echo's ":name" path parameters as OpenAPI's "{name}".
func echoParam(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

func decodeDoc(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func getPath(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// mergeDoc adds the tags, paths and components of extra to doc. An
// operation or a component both have is an error, unless they are equal.
func mergeDoc(doc, extra map[string]any) error {
	for k := range extra {
		switch k {
		case "openapi", "info", "tags", "paths", "components":
		default:
			return fmt.Errorf("%q cannot be merged: only tags, paths and components", k)
		}
	}
	if tags, ok := extra["tags"].([]any); ok {
		have, _ := doc["tags"].([]any)
		for _, t := range tags {
			if !slices.ContainsFunc(have, func(h any) bool { return reflect.DeepEqual(h, t) }) {
				have = append(have, t)
			}
		}
		doc["tags"] = have
	}
	into := func(dst map[string]any, key string) map[string]any {
		m, ok := dst[key].(map[string]any)
		if !ok {
			m = map[string]any{}
			dst[key] = m
		}
		return m
	}
	paths, _ := extra["paths"].(map[string]any)
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item, ok := paths[path].(map[string]any)
		if !ok {
			return fmt.Errorf("path %s is not an object", path)
		}
		dst := into(into(doc, "paths"), path)
		for k, v := range item {
			if old, ok := dst[k]; ok && !reflect.DeepEqual(old, v) {
				return fmt.Errorf("%s of path %s is in the document already", k, path)
			}
			dst[k] = v
		}
	}
	comps, _ := extra["components"].(map[string]any)
	for group, v := range comps {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("components.%s is not an object", group)
		}
		dst := into(into(doc, "components"), group)
		for name, c := range m {
			if old, ok := dst[name]; ok && !reflect.DeepEqual(old, c) {
				return fmt.Errorf("components.%s.%s is in the document already", group, name)
			}
			dst[name] = c
		}
	}
	return nil
}
