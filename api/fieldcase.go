package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// encoding/json matches a JSON member to a struct field case-blind
// ("wAit" sets Wait; the Kelvin sign K and the long s ſ fold to k and s
// too), so DisallowUnknownFields lets through names the OpenAPI document
// does not have. exactNames, run after a successful decode, holds every
// member name of data to a field's exact json name: a request the
// document rejects is a 400 here too.
//
// It is on the path of every request with a body, so it does not parse
// the body again into maps: it scans the bytes once, member by member,
// looks each name up in a table of the type's exact names (built once per
// type), and steps over every value that maps to no struct (a payload is
// skipped, never decoded) without allocating.

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// fieldTable is what exactNames knows of a type, built once.
type fieldTable struct {
	// walk: values of the type can hold objects decoded into structs, so
	// their member names need checking; false for strings, numbers,
	// Unmarshalers (which decode themselves), maps of those...
	walk bool
	// kind is reflect.Struct (fields), or reflect.Slice for slices and
	// arrays (elem).
	kind   reflect.Kind
	fields map[string]*fieldTable // struct: exact json name -> the field's table
	elem   *fieldTable            // slice or array: its element's table
	// fast: the whole decode can be checked by exactNames alone, the
	// unknown fields included (see decodeFast): no maps of structs, no
	// embedded structs.
	fast bool
}

var fieldTables sync.Map // reflect.Type -> *fieldTable

// tableOf is the fieldTable of t, built and cached on first use.
func tableOf(t reflect.Type) *fieldTable {
	if ft, ok := fieldTables.Load(t); ok {
		return ft.(*fieldTable)
	}
	ft := buildTable(t, map[reflect.Type]*fieldTable{})
	actual, _ := fieldTables.LoadOrStore(t, ft)
	return actual.(*fieldTable)
}

// buildTable builds t's table; seen holds the tables under construction,
// for recursive types.
func buildTable(t reflect.Type, seen map[reflect.Type]*fieldTable) *fieldTable {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if ft, ok := seen[t]; ok {
		return ft
	}
	ft := &fieldTable{fast: true}
	seen[t] = ft
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return ft // decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		ft.kind, ft.walk = reflect.Struct, true
		ft.fields = map[string]*fieldTable{}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				ft.fast = false // encoding/json promotes its fields
			}
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			if _, dup := ft.fields[name]; dup {
				continue // the first wins, as fieldByJSONName's loop
			}
			sub := buildTable(f.Type, seen)
			ft.fields[name] = sub
			ft.fast = ft.fast && sub.fast
		}
	case reflect.Slice, reflect.Array:
		ft.elem = buildTable(t.Elem(), seen)
		ft.kind, ft.walk, ft.fast = reflect.Slice, ft.elem.walk, ft.elem.fast
	case reflect.Map:
		elem := buildTable(t.Elem(), seen)
		ft.fast = !elem.walk && elem.fast // unknown fields of its structs would go unseen
	}
	return ft
}

// jsonName is the name encoding/json gives field f; false when it has
// none (unexported, or tagged "-").
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "-" {
		return "", false
	}
	if tag == "" {
		tag = f.Name
	}
	return tag, true
}

// exactNames reports the first member of data, an object decoded into a
// value of type t, whose name is not exactly the json name of a field of
// t, named under prefix; nil when there is none, or when data is not
// valid JSON (the decode proper answered for it).
func exactNames(data []byte, t reflect.Type, prefix string) *Error {
	e, _ := checkNames(data, t, prefix)
	return e
}

// checkNames is exactNames, and whether it read data through to its end
// without surprise: only then is a nil answer a sure one.
func checkNames(data []byte, t reflect.Type, prefix string) (*Error, bool) {
	ft := tableOf(t)
	s := nameScan{data: data}
	s.ws()
	e := s.check(ft, prefix)
	if s.bad {
		return nil, false
	}
	return e, e != nil || s.i == len(data)
}

// nameScan walks JSON text that a decode has accepted. On anything it does
// not expect it sets bad and stops: it never panics, and never reads past
// the end.
type nameScan struct {
	data []byte
	i    int
	bad  bool
}

func (s *nameScan) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next is the byte at the cursor, 0 at the end.
func (s *nameScan) next() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// expect steps over c and the blanks after it.
func (s *nameScan) expect(c byte) bool {
	if s.next() != c {
		s.bad = true
		return false
	}
	s.i++
	s.ws()
	return true
}

// check checks the value at the cursor, of a type whose table is ft, and
// steps over it and the blanks after it.
func (s *nameScan) check(ft *fieldTable, prefix string) *Error {
	switch {
	case ft.kind == reflect.Struct && s.next() == '{':
		s.i++
		s.ws()
		if s.next() == '}' {
			s.i++
			s.ws()
			return nil
		}
		for !s.bad {
			raw, escaped := s.str()
			if s.bad {
				return nil
			}
			sub, ok := ft.fields[string(raw)] // no allocation
			var key string
			if escaped {
				if key, ok = unquote(s.data[s.i-len(raw)-2 : s.i]); !ok {
					s.bad = true
					return nil
				}
				sub, ok = ft.fields[key]
			}
			if !ok || sub.walk {
				if !escaped {
					key = string(raw)
				}
			}
			if !ok {
				return invalidArg(prefix+key, "unknown field %q (field names are case-sensitive)", key)
			}
			s.ws()
			if !s.expect(':') {
				return nil
			}
			if sub.walk {
				if e := s.check(sub, prefix+key+"."); e != nil || s.bad {
					return e
				}
			} else {
				s.skip()
			}
			switch s.next() {
			case ',':
				s.i++
				s.ws()
			case '}':
				s.i++
				s.ws()
				return nil
			default:
				s.bad = true
			}
		}
		return nil
	case ft.kind == reflect.Slice && s.next() == '[':
		s.i++
		s.ws()
		if s.next() == ']' {
			s.i++
			s.ws()
			return nil
		}
		for i := 0; !s.bad; i++ {
			if e := s.check(ft.elem, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"]."); e != nil || s.bad {
				return e
			}
			switch s.next() {
			case ',':
				s.i++
				s.ws()
			case ']':
				s.i++
				s.ws()
				return nil
			default:
				s.bad = true
			}
		}
		return nil
	}
	s.skip() // null, or a value the decode turned down
	return nil
}

// unquote is the JSON string q, quotes included, unescaped.
func unquote(q []byte) (string, bool) {
	var str string
	if json.Unmarshal(q, &str) != nil {
		return "", false
	}
	return str, true
}

// str reads the string at the cursor: its bytes between the quotes, and
// whether they hold an escape.
func (s *nameScan) str() ([]byte, bool) {
	if s.next() != '"' {
		s.bad = true
		return nil, false
	}
	start := s.i + 1
	escaped := false
	for i := start; i < len(s.data); i++ {
		switch s.data[i] {
		case '\\':
			escaped = true
			i++ // the escaped byte: never the closing quote
		case '"':
			s.i = i + 1
			return s.data[start:i], escaped
		}
	}
	s.bad = true
	return nil, false
}

// skip steps over the value at the cursor and the blanks after it.
func (s *nameScan) skip() {
	switch s.next() {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.data) && !s.bad {
			switch s.data[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				s.ws()
				return
			}
		}
		s.bad = true
		return
	default: // a number, true, false or null
		start := s.i
		for s.i < len(s.data) && !isEnd(s.data[s.i]) {
			s.i++
		}
		if s.i == start {
			s.bad = true
			return
		}
	}
	s.ws()
}

// isEnd: c ends a scalar value (a blank, or the punctuation after it).
func isEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']', ':':
		return true
	}
	return false
}
