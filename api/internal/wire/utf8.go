package wire

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// checkUTF8 refuses a body that is not valid UTF-8. JSON exchanged between
// systems must be (RFC 8259, section 8.1), and encoding/json lets it
// through: in a string as U+FFFD, in a raw member (a payload, a result,
// an artifact) byte for byte, kept and served back later as JSON that
// clients' parsers turn down, failing the whole answer it is part of (a
// claim of several jobs, say). The error names the member that holds the
// invalid byte, under prefix, and the byte's offset.
func checkUTF8(data []byte, prefix string) *Error {
	if utf8.Valid(data) {
		return nil
	}
	return invalid(utf8Field(data, prefix), "the body is not valid UTF-8 (RFC 8259, section 8.1): an invalid byte at offset %d",
		invalidOffset(data))
}

// invalidOffset is the offset of data's first byte that is not part of a
// valid UTF-8 sequence.
func invalidOffset(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// utf8Field names the member of data whose string holds invalid UTF-8,
// read with jsontext (which refuses it where encoding/json does not);
// the value under prefix itself when the JSON fails before that string.
func utf8Field(data []byte, prefix string) string {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	for {
		_, err := dec.ReadToken()
		if err == nil {
			continue
		}
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && se.Err != nil && strings.Contains(se.Err.Error(), "UTF-8") {
			return pointerField(prefix, se.JSONPointer)
		}
		return strings.TrimSuffix(prefix, ".")
	}
}

// pointerField writes a JSON Pointer ("/jobs/3/payload") as the API names
// fields ("jobs[3].payload"), under prefix; a token of digits is taken
// for an array index.
func pointerField(prefix string, p jsontext.Pointer) string {
	field := strings.TrimSuffix(prefix, ".")
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && field != "" {
			field += "[" + tok + "]"
			continue
		}
		if field != "" {
			field += "."
		}
		field += tok
	}
	return field
}
