package api

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeEnqueueFast decodes the body most single enqueues send, an object
// of "queue", "kind" and "payload" only whose names and strings hold no
// escapes, into r, a zero value, without reflection. It reports whether it
// did; when it did not, r is untouched and decodeStrict reads the body
// (which answers for every other member, escape, duplicate case or
// malformed body exactly as before). What it decodes is what
// decodeStrict would have: a test and a fuzz target compare the two.
func decodeEnqueueFast(data []byte, r *enqueueRequest) bool {
	if !json.Valid(data) {
		return false
	}
	s := nameScan{data: data}
	s.ws()
	if !s.expect('{') {
		return false
	}
	var out enqueueRequest
	if s.next() == '}' {
		s.i++
		s.ws()
		return false // {}: decodeStrict's, so that kind's error stays its
	}
	for {
		name, escaped := s.str()
		if s.bad || escaped {
			return false
		}
		s.ws()
		if !s.expect(':') {
			return false
		}
		switch string(name) {
		case "queue":
			v, ok := s.plainString()
			if !ok {
				return false
			}
			out.Queue = &v
		case "kind":
			v, ok := s.plainString()
			if !ok {
				return false
			}
			out.Kind = v
		case "payload":
			start := s.i
			s.skip()
			if s.bad {
				return false
			}
			end := s.i
			for end > start && isBlank(data[end-1]) {
				end--
			}
			out.Payload = json.RawMessage(data[start:end:end]) // the body is the request's own: no copy
		default:
			return false
		}
		switch s.next() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.ws()
			if s.i != len(data) {
				return false
			}
			*r = out
			return true
		default:
			return false
		}
	}
}

// plainString reads the string at the cursor, and the blanks after it,
// when it holds no escape and is valid UTF-8 (its bytes are then its
// value).
func (s *nameScan) plainString() (string, bool) {
	raw, escaped := s.str()
	if s.bad || escaped || !utf8.Valid(raw) {
		return "", false
	}
	s.ws()
	return string(raw), true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
