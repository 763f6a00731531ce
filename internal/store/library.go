package store

import (
	"context"
	"crypto/sha1" //nolint:gosec // G505: a name for the library's text, not a secret
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The function library. A script sent with EVALSHA runs its whole text on
// every call: the prelude, then each helper of common.lua it uses made
// into a closure, then its body. Redis 7 keeps a function library
// loaded (what that saves a call: BenchmarkScriptCallModes): its text
// runs once, at FUNCTION LOAD, and an FCALL runs only the function. So
// the per-queue scripts are also built into one library, chronoq_<hash>,
// whose helpers are made once, and each script is a function of it:
//
//   - what a script computes on each call (Redis's now, the events it
//     collects, the marks, the label sets bound) are the non-function
//     locals of common.lua: the library declares them first and each
//     call assigns them again, in common.lua's order (begin);
//   - the keys and arguments the helpers name (K_*, A_*) are locals of the
//     library that each function binds to its own KEYS and ARGV first
//     (bind_<script>), the others set to nil;
//   - a body's own names (K_*, A_*, G_*) are written in as keys[i],
//     args[i] and numbers, and the record and meta fields (R_*, M_*)
//     everywhere as values, as inlineNames does for EVAL.
//
// Redis without functions (before 7.0, and the embedded in-process one)
// answers FUNCTION LOAD with an error: the Store then sends EVALSHA, as it
// always could (see Store.Run). The library's name carries a hash of its
// text, and its functions' names the same hash, so two chronoq versions
// on one Redis each call their own. FCALL on a server that has lost the
// library (a restart without persistence, FUNCTION FLUSH, a cluster node
// that joined since, or that a slot migrates to) answers "Function not
// found": the Store loads it on every master again and runs that call as
// EVALSHA (see fcall).

// library is the library's text and each per-queue script's function
// name, built once, after every script was declared.
var library = sync.OnceValue(buildLibrary)

type libraryText struct {
	name  string            // chronoq_<hash>
	text  string            // FUNCTION LOAD's argument
	funcs map[string]string // script name -> function name
}

var (
	luaCommonName = regexp.MustCompile(`\b[KA]_[A-Za-z0-9_]+\b`)
	luaFieldName  = regexp.MustCompile(`\b[RM]_[A-Za-z0-9_]+\b`)
	luaLocalLine  = regexp.MustCompile(`(?m)^local `)
	luaBodyName   = regexp.MustCompile(`\b[KAG]_[A-Za-z0-9_]+\b|\bGROUP_START\b|\bGROUP\b|\bNKEYS\b`)
)

// libSpecs are the scripts the library holds: the per-queue scripts but
// the workflows' (which run once a node, not once a job).
func libSpecs() []scriptSpec { return allSpecs() }

func buildLibrary() libraryText {
	specs := libSpecs()
	var bodies strings.Builder
	for _, spec := range specs {
		bodies.WriteString(scriptBody(spec))
	}
	common := commonFor(commonDefs, bodies.String())
	fields := fieldValues()
	common = replaceNames(luaFieldName, common, fields)

	// The K_* and A_* names the helpers use, bound by each function.
	var bound []string
	seen := map[string]bool{}
	for _, n := range luaCommonName.FindAllString(stripLuaCommentsAndStrings(common), -1) {
		if !seen[n] {
			seen[n] = true
			bound = append(bound, n)
		}
	}

	// The helpers' per-call state: common.lua's non-function locals.
	var state []string
	var begin strings.Builder
	var helpers strings.Builder
	for _, d := range parseDefs(common) {
		text := stripLuaCommentsAndStrings(d.text)
		if strings.HasPrefix(strings.TrimSpace(text), "local function ") {
			helpers.WriteString(d.text)
			continue
		}
		state = append(state, d.names...)
		stmt := strings.TrimSpace(d.text[luaLocalLine.FindStringIndex(d.text)[0]:])
		stmt = strings.TrimPrefix(stmt, "local ")
		if !strings.Contains(stmt, "=") {
			stmt = strings.Join(d.names, ", ") + " = nil"
		}
		begin.WriteString("  " + strings.ReplaceAll(stmt, "\n", "\n  ") + "\n")
	}

	var b strings.Builder
	b.WriteString(libraryConstants())
	b.WriteString("local KEYS, ARGV, NKEYS\n")
	for chunk := range slices.Chunk(bound, 20) {
		b.WriteString("local " + strings.Join(chunk, ", ") + "\n")
	}
	for chunk := range slices.Chunk(state, 20) {
		b.WriteString("local " + strings.Join(chunk, ", ") + "\n")
	}
	b.WriteString("local function begin()\n" + begin.String() + "end\n")
	b.WriteString(helpers.String())

	funcs := map[string]string{}
	var regs strings.Builder
	for _, spec := range specs {
		regs.WriteString(libraryFunction(spec, bound, fields))
	}
	text := b.String() + regs.String()
	sum := sha1.Sum([]byte(text)) //nolint:gosec // G401: a name, not a secret
	hash := hex.EncodeToString(sum[:])[:16]
	name := "chronoq_" + hash
	for _, spec := range specs {
		funcs[spec.name] = "cq" + hash + "_" + spec.name
	}
	text = strings.ReplaceAll(text, "@FN@", "cq"+hash+"_")
	return libraryText{name: name, text: "#!lua name=" + name + "\n" + text, funcs: funcs}
}

// scriptBody answers the text of lua/<spec.name>.lua.
func scriptBody(spec scriptSpec) string {
	body, err := LuaFile(spec.name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(body)
}

// fieldValues maps the names of the record's and the meta hash's fields
// to their Lua values: R_status -> 1, M_paused -> "paused".
func fieldValues() map[string]string {
	out := map[string]string{}
	for i, f := range RecFields {
		out["R_"+f] = fmt.Sprint(i + 1)
	}
	for _, f := range metaFields {
		out["M_"+f] = fmt.Sprintf("%q", f)
	}
	return out
}

// libraryConstants are the constants every per-queue script's prelude
// defines but its keys, arguments and fields: the same for all of them.
func libraryConstants() string {
	var b strings.Builder
	for _, line := range strings.Split(scriptSpec{name: "library"}.prelude(), "\n") {
		switch {
		case strings.HasPrefix(line, "-- "), line == "",
			strings.HasPrefix(line, "local NKEYS "),
			luaNameDecl.MatchString(line + "\n"):
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// libraryFunction is spec as a function of the library: bind_<name>, which
// binds the helpers' keys and arguments to this script's, and the
// registration of its body.
func libraryFunction(spec scriptSpec, bound []string, fields map[string]string) string {
	own := map[string]string{}
	for i, k := range spec.keys {
		own["K_"+k] = fmt.Sprintf("keys[%d]", i+1)
	}
	fixed := spec.fixedArgs()
	all := append(append([]string{}, commonArgs...), spec.args...)
	for i, a := range all[:fixed] {
		own["A_"+a] = fmt.Sprintf("args[%d]", i+1)
	}
	if g := spec.groupSize(); g > 0 {
		own["GROUP"], own["GROUP_START"] = fmt.Sprint(g), fmt.Sprint(fixed+1)
		for i, a := range all[fixed:] {
			own["G_"+a] = fmt.Sprint(i)
		}
	}
	own["NKEYS"] = fmt.Sprint(len(spec.keys))
	var b strings.Builder
	fmt.Fprintf(&b, "local function bind_%s(keys, args)\n  KEYS, ARGV, NKEYS = keys, args, %d\n", spec.name, len(spec.keys))
	for _, n := range bound {
		v, ok := own[n]
		if !ok {
			v = "nil"
		}
		fmt.Fprintf(&b, "  %s = %s\n", n, v)
	}
	b.WriteString("  begin()\nend\n")
	body := replaceNames(luaFieldName, scriptBody(spec), fields)
	body = replaceNames(luaBodyName, body, own)
	fmt.Fprintf(&b, "redis.register_function('@FN@%s', function(keys, args)\nbind_%s(keys, args)\n%s\nend)\n", spec.name, spec.name, body)
	return b.String()
}

// replaceNames writes values[name] in place of each name re matches that
// values holds.
func replaceNames(re *regexp.Regexp, src string, values map[string]string) string {
	return re.ReplaceAllStringFunc(src, func(name string) string {
		if v, ok := values[name]; ok {
			return v
		}
		return name
	})
}

// Library modes of a Store.
const (
	libUnknown int32 = iota // not tried yet
	libOn                   // loaded: per-queue scripts go by FCALL
	libOff                  // the server has no functions: EVALSHA
)

// libraryMode answers whether the Store calls functions, loading the
// library the first time it is asked. A server that answers the load with
// an error (no FUNCTION command: before Redis 7, the embedded Redis; or a
// user the ACL does not let load functions) is one without: EVALSHA from
// then on. A server that did not answer is asked again a second later
// (EVALSHA meanwhile): it was down, not without functions.
func (s *Store) libraryMode(ctx context.Context) int32 {
	if m := s.lib.Load(); m != libUnknown {
		return m
	}
	s.libMu.Lock()
	defer s.libMu.Unlock()
	if m := s.lib.Load(); m != libUnknown {
		return m
	}
	if time.Since(s.libTried) < time.Second {
		return libOff
	}
	s.libTried = time.Now()
	var rerr redis.Error
	switch err := s.loadLibrary(ctx); {
	case err == nil:
		s.lib.Store(libOn)
	case errors.As(err, &rerr):
		s.lib.Store(libOff)
	default:
		return libOff
	}
	return s.lib.Load()
}

// UseEval makes s send every script with EVALSHA, as on a server without
// functions: for the benchmark that compares the two on one server
// (BenchmarkScriptCallModes in package queue).
func (s *Store) UseEval() { s.lib.Store(libOff) }

// loadLibrary loads the library on the server, or on every master of a
// cluster (refreshing the client's view of the nodes first: one may have
// joined). A library of that name already there is the same text.
func (s *Store) loadLibrary(ctx context.Context) error {
	lib := library()
	load := func(ctx context.Context, c *redis.Client) error {
		err := c.FunctionLoad(ctx, lib.text).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	switch rdb := s.rdb.(type) {
	case *redis.ClusterClient:
		rdb.ReloadState(ctx)
		return rdb.ForEachMaster(ctx, load)
	case *redis.Client:
		return load(ctx, rdb)
	}
	return errors.New("store: functions: a client of unknown kind")
}

// functionMissing reports whether err is FCALL's answer on a server that
// does not hold the function (it lost the library, or is new).
func functionMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// fcall runs the library's function fn. A server that does not hold it
// (it lost the library, or is a cluster node that joined since: one that
// a slot is migrating to answers ASK before it is listed as the slot's
// master) answers "Function not found": the library is loaded again on
// every master the client knows, and this call runs as EVALSHA, which
// any node can run, so a call never fails for a missing library.
// The load is tried at most once a second: while a slot migrates, every
// call to it may answer so, and a load sends the whole library to every
// master.
func (s *Store) fcall(ctx context.Context, sc *Script, fn string, keys []string, argv []any) (any, error) {
	v, err := s.rdb.FCall(ctx, fn, keys, argv...).Result()
	if functionMissing(err) {
		s.reloadLibrary(ctx)
		return sc.s.Run(ctx, s.rdb, keys, argv...).Result()
	}
	return v, err
}

// reloadLibrary loads the library again, unless a load was tried less
// than a second ago; best effort: the caller runs its script by EVALSHA
// either way.
func (s *Store) reloadLibrary(ctx context.Context) {
	s.libMu.Lock()
	defer s.libMu.Unlock()
	if time.Since(s.libReloaded) < time.Second {
		return
	}
	s.libReloaded = time.Now()
	_ = s.loadLibrary(ctx)
}
