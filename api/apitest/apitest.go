// Package apitest holds HTTP exchanges with a chronoq API server to the
// OpenAPI document that server serves (GET /v1/openapi.json), with
// kin-openapi's validator (openapi3filter). It is for tests: the api
// package's tests send every request through [Transport], so every
// status and body they receive is checked against the contract, and a
// test fails on the first answer the document does not describe.
//
// The rules, for one exchange:
//
//   - A request's operation is found by its path as sent, segment by
//     segment, a parameter being one non-empty segment (see findRoute):
//     the document's paths are literal.
//   - A request the document has no operation for must be answered 404
//     (no such path) or 405 (not with that method), or 421 (a server that
//     refuses the request's Host before it routes), with the Error body.
//   - A request the document rejects (a parameter, the body, the
//     credentials) must be answered with a 4xx the operation documents:
//     the document must not accept less than the server does.
//   - Every answer's status must be one the operation documents, and its
//     headers and body must match that response (a response documented
//     without content must have no body).
//   - An event stream (text/event-stream) is checked message by message
//     as the test reads it: each message, as {"event","data"}, must match
//     the documented schema.
package apitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Contract is an OpenAPI document loaded for checking exchanges.
type Contract struct {
	doc    *openapi3.T
	errRef *openapi3.SchemaRef // components/schemas/Error
	routes []route             // the document's paths, in the order findRoute tries them
}

// route is one path of the document, its template split into segments.
type route struct {
	tmpl string
	segs []string
	item *openapi3.PathItem
}

var (
	loaded   sync.Map // string(document) -> *Contract
	initOnce sync.Once
)

// Load reads and validates an OpenAPI document. The same document is
// loaded once per process.
func Load(doc []byte) (*Contract, error) {
	initOnce.Do(func() {
		// The dashboard page: checked for its status and content type only.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	})
	if c, ok := loaded.Load(string(doc)); ok {
		return c.(*Contract), nil
	}
	l := openapi3.NewLoader()
	t, err := l.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: loading the OpenAPI document: %w", err)
	}
	if err := t.Validate(l.Context); err != nil {
		return nil, fmt.Errorf("apitest: the OpenAPI document is invalid: %w", err)
	}
	typelessAcceptNull(t)
	c := &Contract{doc: t, routes: sortedRoutes(t.Paths)}
	if t.Components != nil {
		c.errRef = t.Components.Schemas["Error"]
	}
	if c.errRef == nil {
		return nil, errors.New("apitest: the OpenAPI document has no components/schemas/Error")
	}
	v, _ := loaded.LoadOrStore(string(doc), c)
	return v.(*Contract), nil
}

// typelessAcceptNull marks nullable every schema that constrains nothing
// ("any JSON": a payload, a result). OpenAPI 3.0.3 lets such a schema
// take null (nullable only adds null to a type the schema names, and
// Redocly's recommended rules refuse nullable without a type), while
// kin-openapi refuses null where nullable is not set; this holds the
// server to the document as 3.0.3 reads it.
func typelessAcceptNull(t *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var visit func(r *openapi3.SchemaRef)
	visit = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		s := r.Value
		seen[s] = true
		if s.IsEmpty() {
			s.Nullable = true
		}
		for _, p := range s.Properties {
			visit(p)
		}
		for _, x := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf) {
			visit(x)
		}
		visit(s.Items)
		visit(s.AdditionalProperties.Schema)
	}
	if t.Components != nil {
		for _, r := range t.Components.Schemas {
			visit(r)
		}
	}
	for _, item := range t.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					visit(mt.Schema)
				}
			}
			for _, resp := range op.Responses.Map() {
				if resp.Value != nil {
					for _, mt := range resp.Value.Content {
						visit(mt.Schema)
					}
				}
			}
		}
	}
}

// Exchange is one request and its answer, bodies read.
type Exchange struct {
	Request     *http.Request // its Body is not read: see RequestBody
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

func (c *Contract) schemaOptions() []openapi3.SchemaValidationOption {
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors()}
	if c.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return opts
}

// Check holds one exchange to the document; nil when it conforms.
func (c *Contract) Check(ctx context.Context, x Exchange) error {
	route, in, err := c.checkRequest(ctx, x)
	if err != nil || route == nil {
		return err
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(x.Body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("the answer %d does not match the document: %w (body: %.500s)", x.Status, err, x.Body)
	}
	return checkEmpty(route, x.Status, x.Body)
}

// checkRequest finds the operation of x and checks the request against
// it, and the status against what the request deserves. It answers a nil
// route when there is no operation (and the answer was checked).
func (c *Contract) checkRequest(ctx context.Context, x Exchange) (*routers.Route, *openapi3filter.RequestValidationInput, error) {
	req := x.Request.Clone(ctx)
	if len(bytes.TrimSpace(x.RequestBody)) == 0 {
		// White space is no body, for the server as for a JSON parser,
		// whatever Content-Type came with it.
		x.RequestBody = nil
		req.Header.Del("Content-Type")
	}
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(x.RequestBody)), int64(len(x.RequestBody))
	if x.RequestBody == nil {
		req.Body = http.NoBody
	}
	route, params, err := c.findRoute(req)
	if err != nil {
		return nil, nil, c.checkNoRoute(x, err)
	}
	// A body where the document has none is refused on the methods whose
	// routes read their body; the others (GET, DELETE) ignore it.
	reads := req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: authenticate, SkipSettingDefaults: true, MultiError: true,
			RejectWhenRequestBodyNotSpecified: reads}}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && (x.Status < 400 || x.Status > 499) {
		return nil, nil, fmt.Errorf("the document rejects the request (%w), but the server answered %d: the document must accept what the server does (body: %.500s)",
			err, x.Status, x.Body)
	}
	// ValidateRequest read the body: the response check reads the request
	// again.
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	return route, in, nil
}

// findRoute finds the operation of req, and its path parameters. A
// document's paths are literal and a path parameter is one segment, so
// the request's path is matched as sent, segment by segment: "/v1/queues/" and "//" have no operation, "/v1/queues//claim"
// has none (an empty parameter), and "/v1/queues/a%2Fb/jobs" is the
// jobs of queue "a/b" (whose schema the document may refuse: a 400).
// Where two paths match, the one whose first segment that differs in
// kind is literal is the operation's, as the server's router decides:
// the first match in c.routes (see sortedRoutes).
// (kin-openapi's routers match decoded paths, and leniently.)
func (c *Contract) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	// The path as sent is RawPath when the URL has one (its form as it
	// came, when that differs from Path's own escaping), else Path: what
	// the server's router reads too (Echo's GetPath).
	path, raw := req.URL.RawPath, true
	if path == "" {
		path, raw = req.URL.Path, false
	}
	segs := strings.Split(path, "/")
	i := slices.IndexFunc(c.routes, func(r route) bool { return matchesTemplate(r.segs, segs) })
	if i < 0 {
		return nil, nil, fmt.Errorf("no path of the document is %s", path)
	}
	best := c.routes[i]
	op := best.item.GetOperation(req.Method)
	if op == nil {
		return nil, nil, fmt.Errorf("%s has no operation %s", best.tmpl, req.Method)
	}
	params := map[string]string{}
	for i, t := range best.segs {
		if isParam(t) {
			v := segs[i]
			if raw {
				if u, err := url.PathUnescape(v); err == nil {
					v = u
				}
			}
			params[t[1:len(t)-1]] = v
		}
	}
	return &routers.Route{Spec: c.doc, Path: best.tmpl, PathItem: best.item, Method: req.Method, Operation: op}, params, nil
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

// matchesTemplate reports whether the path segments segs are those of
// the path template's ts: as many, each literal one the same, and each
// parameter not empty.
func matchesTemplate(ts, segs []string) bool {
	if len(ts) != len(segs) {
		return false
	}
	for i, t := range ts {
		if isParam(t) {
			if segs[i] == "" {
				return false
			}
		} else if t != segs[i] {
			return false
		}
	}
	return true
}

// sortedRoutes lists the document's paths in a fixed order, in which the
// first that matches a request is the one the server's router takes: at
// the first segment where one template has a parameter and the other a
// literal, the literal one first (then the shorter first, then by the
// template: an order for any two, though paths of different lengths
// never match the same request).
func sortedRoutes(paths *openapi3.Paths) []route {
	var rs []route
	if paths != nil {
		for tmpl, item := range paths.Map() {
			rs = append(rs, route{tmpl: tmpl, segs: strings.Split(tmpl, "/"), item: item})
		}
	}
	slices.SortFunc(rs, func(a, b route) int {
		for i := range min(len(a.segs), len(b.segs)) {
			if pa, pb := isParam(a.segs[i]), isParam(b.segs[i]); pa != pb {
				if pb {
					return -1 // a's literal first
				}
				return 1
			}
		}
		if c := cmp.Compare(len(a.segs), len(b.segs)); c != 0 {
			return c
		}
		return strings.Compare(a.tmpl, b.tmpl)
	})
	return rs
}

// checkNoRoute checks the answer to a request the document has no
// operation for: 404 (no such path) or 405 (not with that method), or 421
// (the Host refused before routing), with the Error body.
func (c *Contract) checkNoRoute(x Exchange, routeErr error) error {
	if x.Status != http.StatusNotFound && x.Status != http.StatusMethodNotAllowed && x.Status != http.StatusMisdirectedRequest {
		return fmt.Errorf("no operation in the document (%w): want 404, 405 or 421, the server answered %d (body: %.500s)", routeErr, x.Status, x.Body)
	}
	if x.Request.Method == http.MethodHead {
		return nil
	}
	return c.checkJSON(c.errRef, x)
}

// checkJSON checks a JSON answer against a schema.
func (c *Contract) checkJSON(ref *openapi3.SchemaRef, x Exchange) error {
	if ct := x.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("answer %d: Content-Type %q, want application/json", x.Status, ct)
	}
	var v any
	if err := json.Unmarshal(x.Body, &v); err != nil {
		return fmt.Errorf("answer %d: not JSON: %w (body: %.500s)", x.Status, err, x.Body)
	}
	if err := ref.Value.VisitJSON(v, append(c.schemaOptions(), openapi3.VisitAsResponse())...); err != nil {
		return fmt.Errorf("answer %d does not match the schema: %w (body: %.500s)", x.Status, err, x.Body)
	}
	return nil
}

// checkEmpty: a response documented without content has no body.
func checkEmpty(route *routers.Route, status int, body []byte) error {
	r := route.Operation.Responses.Status(status)
	if r == nil || r.Value == nil || len(r.Value.Content) > 0 || len(body) == 0 {
		return nil
	}
	return fmt.Errorf("answer %d is documented without content but has a body: %.500s", status, body)
}

// authenticate says whether a request carries the credentials of a
// security scheme, whatever their value: whether they are right is the
// server's to say (a 401).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	req, s := in.RequestValidationInput.Request, in.SecurityScheme
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		scheme, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
		if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
			return nil
		}
		return in.NewError(errors.New("no Authorization: Bearer <token>"))
	case s.Type == "apiKey" && s.In == "cookie":
		if ck, err := req.Cookie(s.Name); err == nil && ck.Value != "" {
			return nil
		}
		return in.NewError(fmt.Errorf("no %s cookie", s.Name))
	case s.Type == "apiKey" && s.In == "query":
		if req.URL.Query().Get(s.Name) != "" {
			return nil
		}
		return in.NewError(fmt.Errorf("no %s query parameter", s.Name))
	case s.Type == "apiKey" && s.In == "header":
		if req.Header.Get(s.Name) != "" {
			return nil
		}
		return in.NewError(fmt.Errorf("no %s header", s.Name))
	}
	return in.NewError(fmt.Errorf("security scheme %q of type %q is not known to apitest", in.SecuritySchemeName, s.Type))
}

// Transport is an http.RoundTripper that checks every exchange against a
// [Contract] and fails T on any that does not conform.
type Transport struct {
	T        testing.TB
	Contract *Contract
	Base     http.RoundTripper // http.DefaultTransport when nil
}

// Wrap makes client check its exchanges against the document doc.
func Wrap(t testing.TB, client *http.Client, doc []byte) {
	t.Helper()
	c, err := Load(doc)
	if err != nil {
		t.Fatal(err)
	}
	client.Transport = &Transport{T: t, Contract: c, Base: client.Transport}
}

func (tr *Transport) base() http.RoundTripper {
	if tr.Base != nil {
		return tr.Base
	}
	return http.DefaultTransport
}

// CloseIdleConnections closes those of the base transport.
func (tr *Transport) CloseIdleConnections() {
	if ci, ok := tr.base().(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// RoundTrip sends req, checks the exchange, and answers the response with
// its body intact.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	out := req
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		out = req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	res, err := tr.base().RoundTrip(out)
	if err != nil {
		return nil, err
	}
	x := Exchange{Request: req, RequestBody: body, Status: res.StatusCode, Header: res.Header}
	if res.StatusCode == http.StatusOK && strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return tr.stream(req.Context(), x, res)
	}
	x.Body, err = io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(x.Body))
	if err := tr.Contract.Check(req.Context(), x); err != nil {
		tr.T.Errorf("contract: %s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	return res, nil
}
