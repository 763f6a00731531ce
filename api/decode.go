package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// bodyLimit caps every request body: a Content-Length over the limit is a
// 413 at once, and reading past it fails the decode with a 413.
func (s *Server) bodyLimit(c echo.Context) error {
	r := c.Request()
	if r.ContentLength > s.cfg.BodyLimit {
		return tooLarge("", fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, s.cfg.BodyLimit))
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, s.cfg.BodyLimit)
	}
	return nil
}

// decode reads the request body, one JSON object, into v: unknown fields,
// trailing data and values of the wrong type are 400s naming the field, a
// body over the limit a 413. An empty body is an empty object when
// optional, else a 400.
func (s *Server) decode(c echo.Context, v any, optional bool) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v, "")
}

// readBody reads the whole request body (within the body limit).
func readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := readAll(req.Body, req.ContentLength)
	if err != nil {
		return nil, bodyError(err)
	}
	return body, nil
}

// readAll is io.ReadAll, in a buffer of the body's size when it is known
// (one byte more, for the read that finds the end).
func readAll(r io.Reader, size int64) ([]byte, error) {
	n := 512
	if size > 0 && size < 1<<20 {
		n = int(size) + 1
	}
	b := make([]byte, 0, n)
	for {
		nr, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+nr]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
	}
}

// bodyError is the answer to a failed read of the request body.
func bodyError(err error) *Error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return decodeError(err, "")
	case errors.As(err, &ne) && ne.Timeout():
		return invalidArg("", "the request body did not arrive in time")
	}
	return invalidArg("", "reading the request body failed")
}

// decodeStrict decodes data, one JSON value and nothing after it, into v,
// a pointer to a zero value, naming fields under prefix.
func decodeStrict(data []byte, v any, prefix string) error {
	if decodeFast(data, v, prefix) {
		return nil
	}
	return decodeSlow(data, v, prefix, true, exactNames)
}

// decodeRaw decodes one element of a larger body (a job of a batch) into
// v, a pointer to a zero value, naming fields under prefix ("jobs[3].").
func decodeRaw(raw json.RawMessage, v any, prefix string) error {
	if decodeFast(raw, v, prefix) {
		return nil
	}
	return decodeSlow(raw, v, prefix, false, exactNames)
}

// decodeSlow is the Decoder's way, which names every error exactly:
// unknown fields refused, then (whole: data must be one JSON value and
// nothing after it) trailing data, then the member names held to names.
func decodeSlow(data []byte, v any, prefix string, whole bool, names func([]byte, reflect.Type, string) *Error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, prefix)
	}
	if whole {
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			if err != nil {
				return decodeError(err, prefix)
			}
			return invalidArg(strings.TrimSuffix(prefix, "."), "the body must hold one JSON value and nothing after it")
		}
	}
	if err := names(data, reflect.TypeOf(v), prefix); err != nil {
		return err
	}
	return nil
}

// decodeFast is the way of a good request: json.Unmarshal (no Decoder, no
// copy of the body) and exactNames, which also finds the members that
// DisallowUnknownFields would have refused (a name that is no field's,
// exactly, is one of those or a case-folded one). It reports whether it
// decoded data into v; when it did not, v is zero again and the caller
// decodes the slow way, which names the error exactly as before. Only
// types whose table says exactNames sees every member take this way.
func decodeFast(data []byte, v any, prefix string) bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || !tableOf(t).fast {
		return false
	}
	pv := reflect.ValueOf(v)
	if pv.IsNil() || !pv.Elem().IsZero() {
		return false
	}
	if json.Unmarshal(data, v) == nil {
		if e, ok := checkNames(data, t, prefix); e == nil && ok {
			return true
		}
	}
	pv.Elem().SetZero()
	return false
}

// decodeError turns an error of encoding/json into the API's answer.
func decodeError(err error, prefix string) *Error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return tooLarge("", fmt.Sprintf("request body over the limit of %d bytes", mbe.Limit))
	case errors.Is(err, io.EOF):
		return invalidArg(strings.TrimSuffix(prefix, "."), "a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidArg(strings.TrimSuffix(prefix, "."), "malformed JSON: unexpected end of the body")
	case errors.As(err, &se):
		return invalidArg(strings.TrimSuffix(prefix, "."), "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		if te.Field == "" {
			return invalidArg(strings.TrimSuffix(prefix, "."), "must be a JSON object, not %s", te.Value)
		}
		return invalidArg(prefix+te.Field, "must be %s, not %s", jsonKind(te.Type.String()), te.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return invalidArg(prefix+name, "unknown field %q", name)
	}
	return invalidArg(strings.TrimSuffix(prefix, "."), "malformed JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// jsonKind names a Go type of a request field the way a JSON client thinks
// of it.
func jsonKind(goType string) string {
	switch strings.TrimLeft(goType, "*") {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	return "an object"
}

// parseDuration reads a Go duration string ("90s", "1m30s", "250ms") of
// field, which must lie in [lo, hi].
func parseDuration(field, s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidArg(field, "not a duration (%q): want a Go duration such as \"90s\", \"1m30s\" or \"250ms\"", s)
	}
	if d < lo || d > hi {
		return 0, invalidArg(field, "must be in [%s, %s], got %s", fmtDuration(lo), fmtDuration(hi), fmtDuration(d))
	}
	return d, nil
}

// parseTime reads an RFC 3339 time of field.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidArg(field, "not an RFC 3339 time (%q): want e.g. \"2026-11-22T10:05:00.000Z\"", s)
	}
	return t, nil
}

// timeLayout is how the API writes times: RFC 3339, milliseconds, UTC.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// fmtTime is t as the API writes it, or nil (JSON null) for the zero time.
func fmtTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeLayout)
	return &s
}

// fmtDuration is d as a Go duration string without the zero units Go
// appends: "1h" for 1h0m0s, "5m" for 5m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// writeJSON answers v as JSON with status.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSON, b)
}
