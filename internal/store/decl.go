package store

import (
	"context"
	"crypto/sha1" //nolint:gosec // G505: EVAL's name for a script
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// A script is declared once (see the Op variables in ops.go): its name
// (lua/<name>.lua), its keys by layout name, and two Go types. The params
// type P names its arguments: each field tagged `arg:"<name>"` is the
// argument the script reads as A_<name>, in field order; a batch script's
// last field is a slice tagged `arg:"n"`, whose element type names the
// fields of one group (G_<name>). The reply type R names the reply's
// elements in order: `reply:"<name>"`, with the options "rest" (the last
// field, a []any: every element left), "opt" (it and the fields after it
// may be absent: a reply that ends early) and "scalar" (the reply is not
// an array but this one value).
//
// The arguments and the reply are resolved from the types once, when the
// package is initialized; a call fills ARGV from a P by those indexes and
// reads a reply into an R, checking each element's type: a reply that
// does not fit the declaration is an error naming the script and the
// field, never a zero value.

// Op is a script declared with its params type P and reply type R.
type Op[P, R any] struct{ *Script }

// Script is one declared script: its spec (name, keys, argument names)
// and how Go fills and reads it.
type Script struct {
	spec scriptSpec
	s    *redis.Script
	// Sets: label set keys follow the declared keys (see setKeyScripts).
	Sets     bool
	fixed    []field // P's field of each fixed argument
	items    int     // -1 none, else the offset in P of the batch's groups (a slice)
	itemSize uintptr // the size of one group
	group    []field // the group type's field of each group argument
	reply    []replyField
	scalar   bool          // the reply is reply[0]'s one value, not an array
	retryFor time.Duration // how long Run retries while the keys' slot migrates (0: ClusterRetryFor)
}

// field is a struct field as a call reads or writes it: at its offset,
// by its kind (resolved once, from the declared types, so that a call
// neither allocates for nor looks up a field).
type field struct {
	offset uintptr
	kind   reflect.Kind
}

type replyField struct {
	field
	name      string
	rest, opt bool
}

// Name is the script's name, its file's without ".lua".
func (sc *Script) Name() string { return sc.spec.name }

// ops holds every declared script, by name.
var ops = map[string]*Script{}

// declare declares the script name with the keys keyNames (in KEYS
// order), its arguments named by P and its reply by R.
func declare[P, R any](name string, keyNames ...string) *Op[P, R] {
	return declareSpec[P, R](scriptSpec{name: name, keys: keyNames})
}

// declareGlobal declares a script of no queue's slot (see
// scriptSpec.global): its keys are named for its prelude, given by the
// caller (see CallGlobal).
func declareGlobal[P, R any](name string, keyNames ...string) *Op[P, R] {
	return declareSpec[P, R](scriptSpec{name: name, keys: keyNames, global: true})
}

func declareSpec[P, R any](spec scriptSpec) *Op[P, R] {
	name := spec.name
	sc := &Script{items: -1}
	spec.args = sc.resolveArgs(name, typeOf[P]())
	sc.resolveReply(name, typeOf[R]())
	sc.spec = spec
	sc.Sets = setKeyScripts[name]
	sc.s = redis.NewScript(scriptSource(sc.spec))
	if ops[name] != nil {
		panic("store: " + name + " declared twice")
	}
	ops[name] = sc
	return &Op[P, R]{sc}
}

// argFields answers the tagged fields of t, a struct, and their names.
func argFields(name string, t reflect.Type) (idx []int, names []string) {
	if t.Kind() != reflect.Struct {
		panic("store: " + name + ": params must be a struct")
	}
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("arg")
		if !ok {
			panic("store: " + name + ": field " + t.Field(i).Name + " has no arg tag")
		}
		idx, names = append(idx, i), append(names, tag)
	}
	return idx, names
}

func (sc *Script) resolveArgs(name string, t reflect.Type) []string {
	idx, names := argFields(name, t)
	for k, i := range idx {
		if names[k] != "n" {
			sc.fixed = append(sc.fixed, argField(name, t.Field(i)))
			continue
		}
		if k != len(idx)-1 || t.Field(i).Type.Kind() != reflect.Slice {
			panic("store: " + name + ": the batch (arg \"n\") must be the last field, a slice")
		}
		gt := t.Field(i).Type.Elem()
		sc.items, sc.itemSize = int(t.Field(i).Offset), gt.Size()
		gidx, gnames := argFields(name, gt)
		for _, j := range gidx {
			sc.group = append(sc.group, argField(name, gt.Field(j)))
		}
		return append(names, gnames...)
	}
	return names
}

func argField(name string, f reflect.StructField) field {
	switch f.Type.Kind() {
	case reflect.String, reflect.Int, reflect.Int64, reflect.Bool, reflect.Float64:
		return field{offset: f.Offset, kind: f.Type.Kind()}
	}
	panic("store: " + name + ": argument field " + f.Name + " has an unsupported type " + f.Type.String())
}

func (sc *Script) resolveReply(name string, t reflect.Type) {
	if t.Kind() != reflect.Struct {
		panic("store: " + name + ": reply must be a struct")
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("reply")
		if !ok {
			panic("store: " + name + ": reply field " + f.Name + " has no reply tag")
		}
		parts := strings.Split(tag, ",")
		rf := replyField{name: parts[0], field: field{offset: f.Offset, kind: f.Type.Kind()}}
		for _, o := range parts[1:] {
			switch o {
			case "rest":
				rf.rest = true
			case "opt":
				rf.opt = true
			case "scalar":
				sc.scalar = true
			default:
				panic("store: " + name + ": reply field " + f.Name + ": unknown option " + o)
			}
		}
		switch {
		case rf.rest && (f.Type != reflect.TypeFor[[]any]() || i != t.NumField()-1):
			panic("store: " + name + ": reply field " + f.Name + ": rest must be the last field, a []any")
		case !rf.rest && rf.kind != reflect.Int64 && rf.kind != reflect.String && rf.kind != reflect.Interface:
			panic("store: " + name + ": reply field " + f.Name + " must be an int64, a string or an any")
		case sc.scalar && t.NumField() != 1:
			panic("store: " + name + ": a scalar reply has one field")
		}
		sc.reply = append(sc.reply, rf)
	}
}

// Common are the arguments every script of a queue's slot takes first
// (see commonArgs).
type Common struct {
	OffsetUs int64  // added to Redis's TIME
	Pubcmd   string // "PUBLISH", "SPUBLISH" or "" (events off)
	Channel  string // the queue's events channel
	Lsets    string // the label sets whose keys follow the declared ones; "" none
}

// Argv builds the script's ARGV: c, then p's arguments in their declared
// order, then the batch's groups.
func (o *Op[P, R]) Argv(c Common, p *P) []any {
	base := unsafe.Pointer(p) //nolint:gosec // G103: offsets resolved from P's type at declaration (see argFields)
	n := len(commonArgs) + len(o.fixed)
	var items []byte // the batch's groups, as their memory
	if o.items >= 0 {
		hdr := (*sliceHeader)(unsafe.Add(base, o.items))
		items = unsafe.Slice((*byte)(hdr.data), uintptr(hdr.len)*o.itemSize) //nolint:gosec // G103: offsets resolved from P's type at declaration (see argFields)
		n += 1 + hdr.len*len(o.group)
	}
	if o.spec.global {
		n -= len(commonArgs)
	}
	out := make([]any, 0, n)
	if !o.spec.global {
		out = append(out, c.OffsetUs, c.Pubcmd, c.Channel, c.Lsets)
	}
	for _, f := range o.fixed {
		out = appendArg(out, unsafe.Add(base, f.offset), f.kind)
	}
	if o.items >= 0 {
		count := len(items) / int(max(o.itemSize, 1))
		out = append(out, count)
		for i := range count {
			item := unsafe.Pointer(&items[uintptr(i)*o.itemSize]) //nolint:gosec // G103: offsets resolved from P's type at declaration (see argFields)
			for _, f := range o.group {
				out = appendArg(out, unsafe.Add(item, f.offset), f.kind)
			}
		}
	}
	return out
}

// sliceHeader is a slice as it is laid out in memory.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// appendArg appends the field at f, of kind k, as the scripts read it:
// numbers in decimal, a bool as "1" or "0".
func appendArg(out []any, f unsafe.Pointer, k reflect.Kind) []any {
	switch k {
	case reflect.String:
		return append(out, *(*string)(f))
	case reflect.Int:
		return append(out, int64(*(*int)(f)))
	case reflect.Int64:
		return append(out, *(*int64)(f))
	case reflect.Float64:
		return append(out, *(*float64)(f))
	case reflect.Bool:
		if *(*bool)(f) {
			return append(out, "1")
		}
		return append(out, "0")
	}
	panic("store: unsupported argument kind " + k.String()) // refused by declare
}

// ReplyError is a reply that does not fit its script's declaration.
type ReplyError struct {
	Script, Field string
	Reply         any
	Want          string
}

func (e *ReplyError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("store: %s.lua answered %v, not %s", e.Script, e.Reply, e.Want)
	}
	return fmt.Sprintf("store: %s.lua answered %v: its %s is not %s", e.Script, e.Reply, e.Field, e.Want)
}

// Reply reads v, the script's reply, into an R.
func (o *Op[P, R]) Reply(v any) (R, error) {
	var r R
	err := o.read(v, unsafe.Pointer(&r)) //nolint:gosec // G103: offsets resolved from P's type at declaration (see argFields)
	return r, err
}

func (sc *Script) read(v any, out unsafe.Pointer) error {
	if sc.scalar {
		return sc.set(sc.reply[0], v, v, out)
	}
	res, ok := v.([]any)
	if !ok {
		return &ReplyError{Script: sc.spec.name, Reply: v, Want: "an array"}
	}
	for k, f := range sc.reply {
		if f.rest {
			*(*[]any)(unsafe.Add(out, f.offset)) = res[min(k, len(res)):]
			return nil
		}
		if k >= len(res) {
			if f.opt {
				return nil
			}
			return &ReplyError{Script: sc.spec.name, Field: f.name, Reply: v, Want: "present"}
		}
		if err := sc.set(f, res[k], v, out); err != nil {
			return err
		}
	}
	if len(res) > len(sc.reply) {
		return &ReplyError{Script: sc.spec.name, Reply: v, Want: fmt.Sprintf("at most %d elements", len(sc.reply))}
	}
	return nil
}

func (sc *Script) set(f replyField, e, whole any, out unsafe.Pointer) error {
	switch f.kind {
	case reflect.Int64:
		n, ok := e.(int64)
		if !ok {
			return &ReplyError{Script: sc.spec.name, Field: f.name, Reply: whole, Want: "an integer"}
		}
		*(*int64)(unsafe.Add(out, f.offset)) = n
	case reflect.String:
		s, ok := e.(string)
		if !ok {
			return &ReplyError{Script: sc.spec.name, Field: f.name, Reply: whole, Want: "a string"}
		}
		*(*string)(unsafe.Add(out, f.offset)) = s
	default:
		*(*any)(unsafe.Add(out, f.offset)) = e
	}
	return nil
}

// Int reads element i of rest, part of script's reply, as an integer.
func Int(script string, rest []any, i int, field string) (int64, error) {
	if i < len(rest) {
		if n, ok := rest[i].(int64); ok {
			return n, nil
		}
	}
	return 0, &ReplyError{Script: script, Field: field, Reply: rest, Want: "an integer"}
}

// Str reads element i of rest, part of script's reply, as a string.
func Str(script string, rest []any, i int, field string) (string, error) {
	if i < len(rest) {
		if s, ok := rest[i].(string); ok {
			return s, nil
		}
	}
	return "", &ReplyError{Script: script, Field: field, Reply: rest, Want: "a string"}
}

// Keys answers the KEYS of the script on queue k: its declared keys, then
// extra (label sets' keys).
func (sc *Script) Keys(k Keys, extra []string) []string {
	out := make([]string, len(sc.spec.keys), len(sc.spec.keys)+len(extra))
	for i, n := range sc.spec.keys {
		out[i] = k.ByName(n)
	}
	return append(out, extra...)
}

// WFKeys answers the KEYS of a script of a workflow's slot.
func (sc *Script) WFKeys(k WFKeys) []string { return sc.spec.wfKeysOf(k) }

// ScriptCalled names the declared script a command runs: args are the
// command's first arguments (EVALSHA and its SHA1, EVAL and its body, or
// FCALL and the library's function, see library.go). ok is false for any
// other command. For tools that watch the traffic to Redis.
func ScriptCalled(args ...string) (name string, ok bool) {
	if len(args) < 2 {
		return "", false
	}
	switch strings.ToLower(args[0]) {
	case "evalsha", "evalsha_ro":
		name, ok = scriptByHash()[strings.ToLower(args[1])]
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(args[1])) //nolint:gosec // G401: EVAL's own name for a body
		name, ok = scriptByHash()[hex.EncodeToString(sum[:])]
	case "fcall", "fcall_ro":
		name, ok = scriptByFunction()[args[1]]
	}
	return name, ok
}

// FunctionName is the library's function of the script called name ("":
// the script is not in the library), as FCALL sends it.
func FunctionName(name string) string { return library().funcs[name] }

var (
	scriptByHash = sync.OnceValue(func() map[string]string {
		out := map[string]string{}
		for name, sha := range ScriptHashes() {
			out[sha] = name
		}
		return out
	})
	scriptByFunction = sync.OnceValue(func() map[string]string {
		out := map[string]string{}
		for name, fn := range library().funcs {
			out[fn] = name
		}
		return out
	})
)

// ScriptHashes answers each declared script by name with its SHA1 (the
// EVALSHA argument), for tools that watch the traffic to Redis (see
// ScriptCalled, which also knows FCALL's names).
func ScriptHashes() map[string]string {
	out := make(map[string]string, len(ops))
	for name, sc := range ops {
		out[name] = sc.s.Hash()
	}
	return out
}

// RunRaw runs the script called name on queue k with its arguments as
// given, in ARGV order after c, and answers its raw reply: for tests that
// call a script as a retried command would, and compare replies.
func (s *Store) RunRaw(ctx context.Context, name string, k Keys, extra []string, c Common, args ...any) (any, error) {
	sc, ok := ops[name]
	if !ok {
		return nil, fmt.Errorf("store: no script %s", name)
	}
	argv := append([]any{c.OffsetUs, c.Pubcmd, c.Channel, c.Lsets}, args...)
	return s.Run(ctx, sc, sc.Keys(k, extra), argv)
}

// typeOf is reflect.TypeFor, for declarations and their tests.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// CallGlobal runs op, a global script (see declareGlobal), on keys (in
// its declared order) with p, and reads its reply.
func CallGlobal[P, R any](ctx context.Context, s *Store, op *Op[P, R], keys []string, p *P) (R, error) {
	var zero R
	if !op.spec.global || len(keys) != len(op.spec.keys) {
		return zero, fmt.Errorf("store: %s called with %d keys, declared %d", op.spec.name, len(keys), len(op.spec.keys))
	}
	v, err := s.Run(ctx, op.Script, keys, op.Argv(Common{}, p))
	if err != nil {
		return zero, err
	}
	return op.Reply(v)
}
