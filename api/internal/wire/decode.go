package wire

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
)

// Error is a request body the API refuses: bad JSON (a 400) or a body
// over the limit (a 413, TooLarge). Field names the member at fault
// ("jobs[3].kind"), empty for the body as a whole.
type Error struct {
	Field    string
	Message  string
	TooLarge bool
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// invalid is a 400 of field.
func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ReadBody reads the whole request body, within the limit the server put
// on it (http.MaxBytesReader): nil for none.
func ReadBody(req *http.Request) ([]byte, error) {
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
		return invalid("", "the request body did not arrive in time")
	}
	return invalid("", "reading the request body failed")
}

// Strict decodes data, a whole request body, one JSON value and nothing
// after it, into v, a pointer to a zero value, naming fields under prefix:
// a body that is not valid UTF-8, unknown fields (names are
// case-sensitive), trailing data and values of the wrong type are errors
// naming the field.
func Strict(data []byte, v any, prefix string) error {
	if e := checkUTF8(data, prefix); e != nil {
		return e
	}
	if decodeFast(data, v, prefix) {
		return nil
	}
	return decodeSlow(data, v, prefix, true, exactNames)
}

// Raw decodes one element of a larger body (a job of a batch) into v, a
// pointer to a zero value, naming fields under prefix ("jobs[3]."). The
// body as a whole went through [Strict] first, its UTF-8 checked there.
func Raw(raw json.RawMessage, v any, prefix string) error {
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
			return invalid(strings.TrimSuffix(prefix, "."), "the body must hold one JSON value and nothing after it")
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
// decodes the slow way, which names the error exactly. Only types whose
// table says exactNames sees every member take this way.
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
		return &Error{Message: fmt.Sprintf("request body over the limit of %d bytes", mbe.Limit), TooLarge: true}
	case errors.Is(err, io.EOF):
		return invalid(strings.TrimSuffix(prefix, "."), "a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid(strings.TrimSuffix(prefix, "."), "malformed JSON: unexpected end of the body")
	case errors.As(err, &se):
		return invalid(strings.TrimSuffix(prefix, "."), "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		if te.Field == "" {
			return invalid(strings.TrimSuffix(prefix, "."), "must be a JSON object, not %s", te.Value)
		}
		return invalid(prefix+te.Field, "must be %s, not %s", jsonKind(te.Type.String()), te.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return invalid(prefix+name, "unknown field %q", name)
	}
	return invalid(strings.TrimSuffix(prefix, "."), "malformed JSON: %s", strings.TrimPrefix(msg, "json: "))
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
