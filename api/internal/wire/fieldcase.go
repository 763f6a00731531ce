package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// encoding/json matches a JSON member to a struct field case-blind
// ("wAit" sets Wait; the Kelvin sign K and the long s ſ fold to k and s
// too), so DisallowUnknownFields lets through names the OpenAPI document
// does not have. exactNames, run after a successful decode, holds every
// member name of data to a field's exact json name: a request the
// document rejects is a 400 here too.
//
// It is on the path of every request with a body, so it does not parse
// the body again into maps: it reads the body's tokens once with
// jsontext (github.com/go-json-experiment/json, the Go team's json/v2),
// looks each member name up in a table of the type's exact names (built
// once per type), and skips every value that maps to no struct (a
// payload is skipped, never decoded), without allocating.

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
	nd := nameDecoders.Get().(*nameDecoder) //nolint:forcetypeassert // the pool holds nothing else
	defer nameDecoders.Put(nd)
	return nd.checkNames(data, tableOf(t), prefix)
}

// nameOptions make jsontext accept what encoding/json accepts: a name
// twice in an object, and invalid UTF-8 in strings.
var nameOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// nameDecoder is a jsontext.Decoder that reads a request body in place,
// pooled: one of its own for every body would be a few allocations.
type nameDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var nameDecoders = sync.Pool{New: func() any { return new(nameDecoder) }}

// checkNames is checkNames on nd's decoder, for a type whose table is ft;
// it lets go of data when it is done.
func (nd *nameDecoder) checkNames(data []byte, ft *fieldTable, prefix string) (*Error, bool) {
	nd.buf = *bytes.NewBuffer(data) // read in place: no copy of data
	nd.dec.Reset(&nd.buf, nameOptions...)
	defer func() {
		nd.buf = bytes.Buffer{}
		nd.dec.Reset(&nd.buf)
	}()
	e, err := checkValue(&nd.dec, ft, prefix)
	switch {
	case err != nil:
		return nil, false
	case e != nil:
		return e, true
	}
	_, err = nd.dec.ReadToken()
	return nil, errors.Is(err, io.EOF) // nothing after the value
}

// checkValue checks the next value of dec, of a type whose table is ft,
// and reads past it. err is dec's, on JSON it does not accept.
func checkValue(dec *jsontext.Decoder, ft *fieldTable, prefix string) (e *Error, err error) {
	switch {
	case ft.kind == reflect.Struct && dec.PeekKind() == jsontext.KindBeginObject:
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		for dec.PeekKind() != jsontext.KindEndObject {
			name, err := dec.ReadValue() // the name as written, quoted: no allocation
			if err != nil {
				return nil, err
			}
			sub, ok := ft.fields[string(name[1:len(name)-1])] // no allocation
			var key string
			if bytes.IndexByte(name, '\\') >= 0 {
				// Escaped: the name is what it decodes to. The decoder
				// has accepted it, so the only error left is invalid
				// UTF-8, replaced by U+FFFD as encoding/json does.
				b, _ := jsontext.AppendUnquote(nil, name)
				key = string(b)
				sub, ok = ft.fields[key]
			} else if !ok || sub.walk {
				key = string(name[1 : len(name)-1])
			}
			if !ok {
				return invalid(prefix+key, "unknown field %q (field names are case-sensitive)", key), nil
			}
			if sub.walk {
				if e, err := checkValue(dec, sub, prefix+key+"."); e != nil || err != nil {
					return e, err
				}
			} else if err := dec.SkipValue(); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return nil, err
	case ft.kind == reflect.Slice && dec.PeekKind() == jsontext.KindBeginArray:
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		for i := 0; dec.PeekKind() != jsontext.KindEndArray; i++ {
			if e, err := checkValue(dec, ft.elem, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"]."); e != nil || err != nil {
				return e, err
			}
		}
		_, err := dec.ReadToken()
		return nil, err
	}
	return nil, dec.SkipValue() // null, or a value the decode turned down
}
