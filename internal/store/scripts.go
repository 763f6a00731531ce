package store

import (
	"context"
	"embed"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// A script pays for every line before its body on each call: Lua runs
// them to define the helpers (a closure each, with its upvalues) before it
// can call any. Sending all of common.lua with every script cost about a
// quarter of a one-job enqueue's Redis time, most of it for helpers that
// script never calls. So each script gets only the definitions of
// common.lua that it uses, directly or through another helper: a
// definition is each top-level "local" statement (with the comment above
// it), and a script uses it when its body, or a definition it uses, names
// it outside comments and strings. A test (TestScriptsReadNoUndeclaredGlobal)
// checks that no generated script reads a name it does not define.

// luaDef is one top-level definition of common.lua.
type luaDef struct {
	names []string // what it defines
	text  string   // its lines, with the comment above it
}

var (
	luaIdent     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaLocalFunc = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)`)
	luaLocalVars = regexp.MustCompile(`^local ([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
)

// parseDefs splits common.lua into its top-level definitions, in order.
// Lines before the first one (the file's own comment) belong to none.
func parseDefs(src string) []luaDef {
	lines := strings.Split(src, "\n")
	var defs []luaDef
	start := -1 // first line of the current definition's comment and text
	flush := func(end int) {
		if start >= 0 {
			defs[len(defs)-1].text = strings.Join(lines[start:end], "\n") + "\n"
		}
	}
	for i, l := range lines {
		var names []string
		if m := luaLocalFunc.FindStringSubmatch(l); m != nil {
			names = []string{m[1]}
		} else if m := luaLocalVars.FindStringSubmatch(l); m != nil {
			for _, n := range strings.Split(m[1], ",") {
				names = append(names, strings.TrimSpace(n))
			}
		} else {
			continue
		}
		// Its comment: the comment lines right above it.
		first := i
		for first > 0 && strings.HasPrefix(lines[first-1], "--") {
			first--
		}
		if start >= 0 {
			flush(first)
		}
		defs = append(defs, luaDef{names: names})
		start = first
	}
	flush(len(lines))
	return defs
}

// commonFor answers the definitions of defs that body uses, directly or
// through one another, in their order.
func commonFor(defs []luaDef, body string) string {
	byName := map[string]int{}
	for i, d := range defs {
		for _, n := range d.names {
			byName[n] = i
		}
	}
	used := make([]bool, len(defs))
	var visit func(text string)
	visit = func(text string) {
		for _, w := range luaIdent.FindAllString(stripLuaCommentsAndStrings(text), -1) {
			if i, ok := byName[w]; ok && !used[i] {
				used[i] = true
				visit(defs[i].text)
			}
		}
	}
	visit(body)
	var b strings.Builder
	for i, d := range defs {
		if used[i] {
			b.WriteString(d.text)
		}
	}
	return b.String()
}

// commonDefs are the definitions of lua/common.lua.
var commonDefs = defsOf("common")

// defsOf answers the definitions of lua/<file>.lua.
func defsOf(file string) []luaDef {
	common, err := luaFS.ReadFile("lua/" + file + ".lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return parseDefs(string(common))
}

// scriptSource is the text sent for spec: namedSource with the names of
// a per-queue script's keys, arguments and fields written in (see
// inlineNames).
func scriptSource(spec scriptSpec) string {
	if spec.global {
		return namedSource(spec)
	}
	return inlineNames(namedSource(spec))
}

// namedSource is spec's text as written: its prelude, the definitions of
// common.lua it uses, and its body.
func namedSource(spec scriptSpec) string {
	body := scriptBody(spec)
	if spec.global {
		if spec.common == "" {
			return spec.prelude() + body
		}
		return spec.prelude() + "-- from " + spec.common + ".lua, what this script uses:\n" + commonFor(defsOf(spec.common), body) + "\n" + body
	}
	rest := "-- from common.lua, what this script uses:\n" + commonFor(commonDefs, body) + "\n" + body
	return spec.prelude() + metaPrelude(rest) + rest
}

// A script also pays, on each call, for every local its helpers close
// over: Lua links each upvalue of each closure it makes by walking the
// list of the chunk's open upvalues, which is as long as the locals the
// closures share. The names of keys, arguments, record fields and meta
// fields (K_*, A_*, R_*, M_*, G_*) are constants for one script, so
// inlineNames writes their values in place of them (KEYS[2], ARGV[5], 3,
// "created_ms") and drops their locals: a quarter of what a claim's
// helpers cost to make, measured on a claim. The source keeps the names;
// only what is sent has the values.
var (
	luaNameDecl = regexp.MustCompile(`(?m)^local ([KARMG]_[A-Za-z0-9_]+) = (.+)\n`)
	luaNameUse  = regexp.MustCompile(`\b[KARMG]_[A-Za-z0-9_]+\b`)
)

// inlineNames answers src with its K_*, A_*, R_*, M_* and G_* locals
// (each declared on a line of its own, "local K_jobs = KEYS[2]") written
// in where they are used, and their declarations dropped.
func inlineNames(src string) string {
	values := map[string]string{}
	src = luaNameDecl.ReplaceAllStringFunc(src, func(line string) string {
		m := luaNameDecl.FindStringSubmatch(line)
		values[m[1]] = m[2]
		return ""
	})
	return luaNameUse.ReplaceAllStringFunc(src, func(name string) string {
		if v, ok := values[name]; ok {
			return v
		}
		return name
	})
}

// Retrying a cluster in motion. While a queue's slot migrates, Redis
// answers a script ASK (go-redis follows it), MOVED (go-redis follows it
// and refreshes its slot map) or TRYAGAIN (the queue's keys are split
// between the two nodes for the moment). None of them ran the script, so
// run tries again, backing off from 1 ms to at most 100 ms a wait, for as
// long as ctx allows and at most ClusterRetryFor: a caller sees latency
// during a migration, not an error. (CLUSTERDOWN is an outage, not a
// migration: it is answered as ErrUnavailable.)
const (
	ClusterRetryFor      = 2 * time.Minute
	clusterRetryMaxSleep = 100 * time.Millisecond
)

// Migrating reports whether err is Redis saying the slot is moving.
func Migrating(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"TRYAGAIN", "ASK ", "MOVED "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Store runs the declared scripts on one Redis client: the one place that
// sends a script (see Run).
type Store struct {
	rdb   redis.UniversalClient
	clock *Clock
	// lib is the library mode (libUnknown, libOn, libOff: see
	// library.go), settled by the first call under libMu.
	lib         atomic.Int32
	libMu       sync.Mutex
	libTried    time.Time // the last first load tried (libraryMode), under libMu
	libReloaded time.Time // the last load again tried (reloadLibrary), under libMu
}

// New answers a Store that runs scripts on rdb, whose clock is clock
// (see Clock).
func New(rdb redis.UniversalClient, clock *Clock) *Store { return &Store{rdb: rdb, clock: clock} }

// Clock answers Redis's clock as this store's client sees it: the one
// estimate everything built on the client shares.
func (s *Store) Clock() *Clock { return s.clock }

// Redis answers the client the store runs its scripts on.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Run runs sc with keys and argv (see Op.Argv). It sends EVALSHA and
// falls back to EVAL when the server has lost its script cache (restart,
// failover, SCRIPT FLUSH; per node in a cluster); retries while the keys'
// slot migrates (see retryMigration); and wraps errors from Redis (see
// wrapRedis). A nil reply is answered as nil, not as an error.
func (s *Store) Run(ctx context.Context, sc *Script, keys []string, argv []any) (any, error) {
	var v any
	fn := ""
	if !sc.spec.global && s.libraryMode(ctx) == libOn {
		fn = library().funcs[sc.spec.name]
	}
	err := retryMigrationFor(ctx, sc.retryFor, func() error {
		var err error
		if fn != "" {
			v, err = s.fcall(ctx, sc, fn, keys, argv)
		} else {
			v, err = sc.s.Run(ctx, s.rdb, keys, argv...).Result()
		}
		if errors.Is(err, redis.Nil) {
			v = nil
			return nil
		}
		return err
	})
	return v, err
}

// RetryMigration runs f until it answers anything but a migration (see
// migrating), for as long as ctx allows and at most ClusterRetryFor.
// Errors from Redis are wrapped as wrapRedis does.
func RetryMigration(ctx context.Context, f func() error) error {
	return retryMigrationFor(ctx, ClusterRetryFor, f)
}

// retryMigrationFor is RetryMigration for at most retryFor (0:
// ClusterRetryFor).
func retryMigrationFor(ctx context.Context, retryFor time.Duration, f func() error) error {
	if retryFor == 0 {
		retryFor = ClusterRetryFor
	}
	var deadline time.Time
	sleep := time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if !Migrating(err) {
			return WrapRedis(err)
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(retryFor)
		}
		if now.After(deadline) {
			return WrapRedis(err)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		sleep = min(2*sleep, clusterRetryMaxSleep)
	}
}

// ErrUnavailable wraps errors from Redis (unreachable, timed out, failing
// over): the operation may be retried.
var ErrUnavailable = errors.New("redis unavailable")

type unavailableError struct{ err error }

func (e unavailableError) Error() string { return "queue: redis: " + e.err.Error() }
func (e unavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.err}
}

// IsScriptError reports whether err is a script's own answer (a bug or a
// malformed call, which wrote nothing), not a failure to reach Redis: an
// error it raised names where, "user_script" (EVAL) or "user_function"
// (FCALL of the library).
func IsScriptError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "ERR Error running script") || strings.HasPrefix(msg, "ERR Error compiling script") ||
		strings.HasPrefix(msg, "ERR chronoq ") || strings.Contains(msg, "user_script") || strings.Contains(msg, "user_function")
}

// WrapRedis wraps an error of a Redis call: a connection that failed is
// ErrUnavailable; a context's end and nil are answered as they are.
func WrapRedis(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if IsScriptError(err) {
		return err // a script bug or a malformed call, not an outage
	}
	return unavailableError{err}
}

// stripLuaCommentsAndStrings blanks out the comments and the contents of
// the quoted strings of Lua source (these scripts use no long brackets).
func stripLuaCommentsAndStrings(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		case c == '\'' || c == '"':
			b.WriteByte(c)
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// LuaFile answers the text of lua/<name>.lua as it is embedded, for tests
// that hold Go's figures and names equal to the scripts'.
func LuaFile(name string) ([]byte, error) { return luaFS.ReadFile("lua/" + name + ".lua") }
