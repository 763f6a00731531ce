package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// stream checks the head of an event stream at once, and each message of
// its body as the test reads it.
func (tr *Transport) stream(ctx context.Context, x Exchange, res *http.Response) (*http.Response, error) {
	fail := func(err error) {
		tr.T.Errorf("contract: %s %s: %v", x.Request.Method, x.Request.URL.RequestURI(), err)
	}
	schema, err := tr.Contract.streamSchema(ctx, x)
	if err != nil {
		fail(err)
		return res, nil
	}
	res.Body = &sseChecker{ReadCloser: res.Body, check: func(msg map[string]any) {
		if err := schema.Value.VisitJSON(msg, append(tr.Contract.schemaOptions(), openapi3.VisitAsResponse())...); err != nil {
			b, _ := json.Marshal(msg)
			fail(fmt.Errorf("event stream message %s does not match the document: %w", b, err))
		}
	}, fail: fail}
	return res, nil
}

// streamSchema checks the request and the head of an event stream's
// answer, and answers the schema of its messages.
func (c *Contract) streamSchema(ctx context.Context, x Exchange) (*openapi3.SchemaRef, error) {
	route, in, err := c.checkRequest(ctx, x)
	if err != nil {
		return nil, err
	}
	if route == nil {
		return nil, fmt.Errorf("an event stream from a route the document lacks")
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true}}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return nil, fmt.Errorf("the answer %d does not match the document: %w", x.Status, err)
	}
	r := route.Operation.Responses.Status(x.Status)
	mt := r.Value.Content.Get(x.Header.Get("Content-Type"))
	if mt == nil || mt.Schema == nil {
		return nil, fmt.Errorf("the document has no schema for the event stream of %d", x.Status)
	}
	return mt.Schema, nil
}

// sseChecker passes an event stream through, parsing it as it goes: each
// message (a block of lines ended by a blank line) with data goes to
// check as {"event": its event field, "data": its data, decoded as JSON}.
// Comment lines (": ping") are skipped.
type sseChecker struct {
	io.ReadCloser
	check func(map[string]any)
	fail  func(error)

	mu    sync.Mutex
	buf   []byte // an incomplete line
	event string
	data  []string
}

func (s *sseChecker) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p[:n]...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.line(strings.TrimSuffix(string(s.buf[:i]), "\r"))
		s.buf = s.buf[i+1:]
	}
	return n, err
}

func (s *sseChecker) line(l string) {
	switch {
	case l == "":
		if len(s.data) > 0 {
			var data any
			raw := strings.Join(s.data, "\n")
			if err := json.Unmarshal([]byte(raw), &data); err != nil {
				s.fail(fmt.Errorf("event stream data is not JSON: %q", raw))
			} else {
				s.check(map[string]any{"event": s.event, "data": data})
			}
		}
		s.event, s.data = "", nil
	case strings.HasPrefix(l, ":"):
	default:
		name, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			s.event = value
		case "data":
			s.data = append(s.data, value)
		case "id", "retry":
		default:
			s.fail(fmt.Errorf("event stream line of an unknown field: %q", l))
		}
	}
}
