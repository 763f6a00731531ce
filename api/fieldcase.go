package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// encoding/json matches a JSON member to a struct field case-blind
// ("wAit" sets Wait), so DisallowUnknownFields lets through names the
// OpenAPI document does not have. exactNames, run after a successful
// decode, holds every member name of data to a field's exact json name:
// a request the document rejects is a 400 here too.

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// exactNames reports the first member of data, an object decoded into a
// value of type t, whose name matches a field of t only case-blind, named
// under prefix; nil when there is none. It reads only the objects that
// map to structs, member by member: a payload is never decoded again.
func exactNames(data []byte, t reflect.Type, prefix string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return nil // decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil //nolint:nilerr // not an object: the decode proper answered for it
		}
		for name, val := range obj {
			f, ok := fieldByJSONName(t, name)
			if !ok {
				return invalidArg(prefix+name, "unknown field %q (field names are case-sensitive)", name)
			}
			if err := exactNames(val, f.Type, prefix+name+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return nil //nolint:nilerr // not an array: the decode proper answered for it
		}
		for i, el := range arr {
			if err := exactNames(el, t.Elem(), strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"]."); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByJSONName finds the field of struct type t that encoding/json
// names name, exactly.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
