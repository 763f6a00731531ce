package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The decode of a request body has a fast way (json.Unmarshal and a scan
// of the member names) and a reference (a json.Decoder with
// DisallowUnknownFields, then a second parse into maps to check the
// names' case). These tests hold the fast one to the reference's answers:
// the decoded value, and every error, field and message alike.

// refExactNames is the reference check of member names: a full parse into
// map[string]json.RawMessage per object.
func refExactNames(data []byte, t reflect.Type, prefix string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil //nolint:nilerr // not an object: the decode proper answered for it
		}
		for _, name := range memberOrder(data) {
			val := obj[name]
			f, ok := refField(t, name)
			if !ok {
				return invalid(prefix+name, "unknown field %q (field names are case-sensitive)", name)
			}
			if err := refExactNames(val, f.Type, prefix+name+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return nil //nolint:nilerr // not an array: the decode proper answered for it
		}
		for i, el := range arr {
			if err := refExactNames(el, t.Elem(), strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"]."); err != nil {
				return err
			}
		}
	}
	return nil
}

// memberOrder is the names of the object data in the order they come: a
// map holds them in random order, so with two bad names the reference
// would name either; it names the first, as the fast way does.
func memberOrder(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		names = append(names, name)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return names
		}
	}
	return names
}

func refField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if n, ok := jsonName(f); ok && n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// refDecodeStrict is the reference Strict: the Decoder's way, with the
// names held by refExactNames.
func refDecodeStrict(data []byte, v any, prefix string) error {
	if e := checkUTF8(data, prefix); e != nil {
		return e // not what is compared: both ways check it first
	}
	return decodeSlow(data, v, prefix, true, refExactNames)
}

// refDecodeRaw is the reference Raw.
func refDecodeRaw(raw []byte, v any, prefix string) error {
	return decodeSlow(raw, v, prefix, false, refExactNames)
}

// decodeTypes are request types of the API, one of each shape: with a
// payload, nested structs and slices of them, a map, raw members, none.
var decodeTypes = []func() any{
	func() any { return new(enqueueRequest) },
	func() any { return new(struct{ Jobs []enqueueRequest }) },
	func() any {
		return new(struct {
			Jobs []enqueueRequest `json:"jobs"`
		})
	},
	func() any { return new(pushConfigRequest) },
	func() any { return new(workflowRequest) },
	func() any { return new(nodeRequest) },
	func() any { return new(claimRequest) },
	func() any { return new(backoffRequest) },
	func() any { return new(struct{}) },
}

var decodeSeeds = []string{
	`{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":1}}`,
	`{"kind":"k","payload":{"Kind":1,"KIND":[{"x":"}"}],"s":"\"{["}, "labels":["a","b"] }`,
	` {"kind":"k"} `,
	`{"Kind":"k"}`,
	`{"kind":"k","wAit":"1s"}`,
	`{"wait":"1s","max":3}`,
	`{"wAit":"1s"}`,
	"{\"\u212aind\":\"k\"}",  // the Kelvin sign folds to k
	"{\"\u017fueue\":\"q\"}", // the long s folds to s... not to q: unknown
	"{\"qu\u017fue\":\"q\"}",
	`{"\u212aind":"k"}`,
	`{"\u006bind":"k"}`, // an escaped, exact name
	`{"k\u0069nd":"k","payload":1}`,
	`{"kind":"k","unknown":1}`,
	`{"kind":"k","payload":{}} {"x":1}`,
	`{"kind":"k"}}`,
	`{"kind":"k"} x`,
	`{"kind":1}`,
	`{"kind":"k","max_attempts":"3"}`,
	`{"kind":"k","max_attempts":3.5}`,
	`{"kind":"k","labels":"a"}`,
	`{"kind":"k","labels":[1]}`,
	`{"kind":"k",}`,
	`{"kind":"k"`,
	`{"kind"`,
	`[]`,
	`[{"kind":"k"}]`,
	`null`,
	`"x"`,
	`12`,
	``,
	`   `,
	`{}`,
	`{"kind":"k","target":{"url":"http://x","headers":{"X-A":"1","Url":"2"},"timeout":"1s"}}`,
	`{"kind":"k","target":{"URL":"http://x"}}`,
	`{"kind":"k","target":{"url":"http://x","nope":1}}`,
	`{"kind":"k","target":null}`,
	`{"kind":"k","target":[]}`,
	`{"kind":"k","depends_on":[{"queue":"q","id":"1"},{"queue":"q","ID":"2"}]}`,
	`{"kind":"k","depends_on":[{"queue":"q","id":"1"},{"queue":"q","idx":"2"}]}`,
	`{"kind":"k","depends_on":[null,{"queue":"q","id":"1"}]}`,
	`{"kind":"k","depends_on":{}}`,
	`{"kind":"k","backoff":{"initial":"1s","Factor":2}}`,
	`{"jobs":[{"kind":"a"},{"kind":"b","Payload":{}}]}`,
	`{"jobs":[{"kind":"a"},{"kind":"b","extra":{}}]}`,
	`{"Jobs":[{"kind":"a"}]}`,
	`{"jobs":[{"kind":"a"},{"kind":"b"}],"jobs":[{"kind":"c"}]}`,
	`{"target":{"url":"u","method":"POST"},"secrets":["s"],"concurrency":2}`,
	`{"nodes":[{"name":"a","job":{"Kind":"k"}}],"on_failure":"cancel"}`,
	`{"name":"a","depends_on":["b"],"job":{"kind":"k"}}`,
	`{"initial":"1s","factor":2,"max":"1h","jitter":0.1}`,
	`{"kind":"k","payload":"\ud800"}`,
	"{\"kind\":\"k\",\"payload\":\"\xff\"}",
	`{"kind":"k","payload":[[[[[[[[[[1]]]]]]]]]]}`,
	"{\"kind\"\t:\n\"k\"\r,\"payload\" : { } }",
	`{"kind":"k","payload":true,"run_at":null,"delay":null}`,
}

// checkSameDecode decodes body into a fresh value of each type, both ways.
func checkSameDecode(t *testing.T, body string) {
	t.Helper()
	for _, mk := range decodeTypes {
		got, want := mk(), mk()
		gotErr := Strict([]byte(body), got, "")
		wantErr := refDecodeStrict([]byte(body), want, "")
		if wantErr != nil {
			require.Error(t, gotErr, "%T %q", got, body)
			require.Equal(t, wantErr, gotErr, "%T %q", got, body)
			continue
		}
		require.NoError(t, gotErr, "%T %q", got, body)
		require.Equal(t, want, got, "%T %q", got, body)

		got, want = mk(), mk()
		gotErr = Raw([]byte(body), got, "jobs[2].")
		wantErr = refDecodeRaw([]byte(body), want, "jobs[2].")
		if wantErr != nil {
			require.Equal(t, wantErr, gotErr, "%T %q", got, body)
			continue
		}
		require.NoError(t, gotErr, "%T %q", got, body)
		require.Equal(t, want, got, "%T %q", got, body)
	}
}

func TestDecodeSameAsReference(t *testing.T) {
	t.Parallel()
	for _, body := range decodeSeeds {
		checkSameDecode(t, body)
	}
}

func FuzzDecodeSameAsReference(f *testing.F) {
	for _, body := range decodeSeeds {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if duplicateNames(body) {
			t.Skip("duplicate member names: the reference reads only the last of each")
		}
		checkSameDecode(t, body)
	})
}

// duplicateNames reports whether an object of body names a member twice
// (false when body is not JSON).
func duplicateNames(body string) bool {
	type frame struct {
		object, key bool // an object; its next token is a name
		names       map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(strings.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if name, ok := tok.(string); ok {
				if top.names[name] {
					return true
				}
				top.names[name] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, names: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a name comes next
		}
	}
}

func TestExactNamesAllocatesNothing(t *testing.T) {
	body := []byte(`{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":1},"labels":["x"]}`)
	typ := reflect.TypeFor[*enqueueRequest]()
	require.Nil(t, exactNames(body, typ, ""))
	// With a decoder of its own: under -race, sync.Pool drops some of
	// what it is given, on purpose, and its New allocates.
	var nd nameDecoder
	ft := tableOf(typ)
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = nd.checkNames(body, ft, "") }))
}

func BenchmarkDecodeEnqueue(b *testing.B) {
	body := []byte(`{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":1}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req enqueueRequest
			if err := Strict(body, &req, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req enqueueRequest
			if err := refDecodeStrict(body, &req, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
