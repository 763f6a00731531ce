package store

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// keyless are the commands a script may call with no key.
var keyless = []string{"TIME", "PUBSUB", "PUBLISH"} // PUBLISH names a channel, not a key

// emptying are commands that can leave a key empty, so deleted: a key a
// script empties and writes again counts, during a slot migration, as a
// key the node does not hold, and the script fails half done. The pending
// list is trimmed with LSET and LTRIM instead (see pop_pending).
var emptying = []string{"RPOP", "LPOP", "ZPOPMIN", "ZPOPMAX", "DEL", "UNLINK", "LREM", "SPOP", "GETDEL", "XTRIM"}

// Every redis.call of every script names its key with a K_ variable (the
// declared KEYS, see layout.go), never a string it built; no script can
// empty a key; and every K_ a script uses is declared for it.
func TestScriptsTouchOnlyDeclaredKeys(t *testing.T) {
	t.Parallel()
	call := regexp.MustCompile(`redis\.p?call\('([A-Z]+)'(?:,\s*([^,)]+))?`)
	use := regexp.MustCompile(`\bK_([a-z]+)\b`)
	xgroup := regexp.MustCompile(`redis\.p?call\('XGROUP',\s*'[A-Z]+',\s*([^,)\s]+)`)
	// Helpers that take a key: every call passes a K_ variable.
	keyed := regexp.MustCompile(`\b(head_of|note_sweep|first_score)\(([^,)]*)`)
	common, err := fs.ReadFile(luaFS, "lua/common.lua")
	require.NoError(t, err)
	for _, spec := range append(append(allSpecs(), wfSpecs()...), globalSpecs()...) {
		body, err := fs.ReadFile(luaFS, "lua/"+spec.name+".lua")
		require.NoError(t, err)
		for name, src := range map[string]string{"common.lua": string(common), spec.name + ".lua": string(body)} {
			for _, m := range call.FindAllStringSubmatch(src, -1) {
				cmd, arg := m[1], strings.TrimSpace(m[2])
				if cmd == "XGROUP" {
					continue // its key comes after its subcommand: see xgroup
				}
				if !(name == "delete.lua" && cmd == "UNLINK") { // deleting a queue writes nothing after
					require.NotContains(t, emptying, cmd, "%s: %s can empty a key", name, cmd)
				}
				if slices.Contains(keyless, cmd) || arg == "key" && (name == "list.lua" || name == "common.lua") {
					continue // list.lua's key is one of its K_ sets, picked by status; the keyed helpers' (see keyed)
				}
				require.True(t, strings.HasPrefix(arg, "K_"), "%s: %s on %q, not a declared key", name, cmd, arg)
			}
			for _, m := range xgroup.FindAllStringSubmatch(src, -1) {
				if name == "common.lua" && m[1] == "key" {
					continue // register_set's: a label set's declared key
				}
				require.True(t, strings.HasPrefix(m[1], "K_"), "%s: XGROUP on %q, not a declared key", name, m[1])
			}
			for _, m := range keyed.FindAllStringSubmatch(src, -1) {
				if arg := strings.TrimSpace(m[2]); name != "common.lua" || !slices.Contains([]string{"key", "sched", "dead"}, arg) { // common.lua's helpers pass on their parameters
					require.True(t, strings.HasPrefix(arg, "K_"), "%s: %s(%s), not a declared key", name, m[1], arg)
				}
			}
		}
		// The script's own body (common.lua's helpers are called only by
		// the scripts that declare their keys) uses only its keys.
		for _, m := range use.FindAllStringSubmatch(string(body), -1) {
			require.Contains(t, spec.keys, m[1], "%s.lua uses K_%s, which specs in layout.go do not declare for it", spec.name, m[1])
		}
	}
}

// The workflow hash's fields are named in layout.go only: the scripts of
// a workflow's slot read them from their prelude (WF_*, NODE_*), and no
// script spells a node field's prefix ("u:" .. name) or a meta field
// beside K_wf.
func TestScriptsSpellNoWorkflowField(t *testing.T) {
	t.Parallel()
	prefix := regexp.MustCompile(`'[a-z]:'\s*\.\.`)
	meta := regexp.MustCompile(`K_wf\b[^\n]*'(` + strings.Join([]string{WFMetaID, WFMetaCreated, WFMetaPolicy, WFMetaGen, WFMetaN,
		WFMetaNames, WFMetaEnded, WFMetaStarted, WFMetaCanceled, WFMetaEndedAt, WFMetaUpMax}, "|") + `)'`)
	for _, spec := range append(allSpecs(), wfSpecs()...) {
		src := scriptSource(spec)
		require.NotRegexp(t, prefix, src, "%s.lua spells a workflow node field", spec.name)
		require.NotRegexp(t, meta, src, "%s.lua spells a workflow meta field", spec.name)
		if slices.Contains(spec.keys, KeyWorkflow) {
			for _, f := range wfPrelude {
				require.Contains(t, spec.prelude(), "local "+f.lua+" = ", spec.name)
			}
		}
	}
}

// The queue's meta fields are named in layout.go only: no script spells
// one beside K_meta, nor a counter it counts (count('...')); each reads
// them from its prelude (M_*), which defines only those it uses.
func TestScriptsSpellNoMetaField(t *testing.T) {
	t.Parallel()
	quoted := `['"](` + strings.Join(metaFields, "|") + `)['"]`
	meta := regexp.MustCompile(`K_meta\b[^\n]*` + quoted)
	counted := regexp.MustCompile(`\bcount\(\s*` + quoted)
	for _, spec := range allSpecs() {
		body, err := fs.ReadFile(luaFS, "lua/"+spec.name+".lua")
		require.NoError(t, err)
		src := commonFor(commonDefs, string(body)) + string(body)
		require.NotRegexp(t, meta, src, "%s.lua spells a meta field", spec.name)
		require.NotRegexp(t, counted, src, "%s.lua spells a counter", spec.name)
		sent := namedSource(spec)
		for _, f := range metaFields {
			uses := regexp.MustCompile(`\bM_` + f + `\b`).MatchString(stripLuaCommentsAndStrings(src))
			require.Equal(t, uses, strings.Contains(sent, "local M_"+f+" = "), "%s.lua: M_%s", spec.name, f)
		}
	}
	require.Contains(t, namedSource(Claim.spec), `local M_paused = "paused"`)
	require.Contains(t, scriptSource(Claim.spec), `"paused"`)
	require.NotContains(t, scriptSource(Claim.spec), `M_paused`)
}

// A script's declared keys are exactly the layout's keys, each once.
func TestScriptSpecsNameLayoutKeys(t *testing.T) {
	t.Parallel()
	k := QueueKeys("ns", "q")
	for _, spec := range wfSpecs() {
		require.Equal(t, []string{KeyWorkflow}, spec.keys, "%s: a workflow's scripts touch its one hash", spec.name)
	}
	for _, spec := range allSpecs() {
		seen := map[string]bool{}
		for _, name := range spec.keys {
			require.False(t, seen[name], "%s declares %s twice", spec.name, name)
			seen[name] = true
			require.Contains(t, k.All(), k.ByName(name))
		}
	}
	require.Len(t, Create.spec.keys, len(k.All()), "create.lua makes every key")
	require.Len(t, ops, len(allSpecs())+len(wfSpecs())+len(globalSpecs()), "every declared script is loaded")
}

// A script called with a malformed argument answers an error and writes
// nothing: every script parses its arguments before its first write.
func TestScriptsRefuseMalformedArgumentsBeforeWriting(t *testing.T) {
	t.Parallel()
	for _, spec := range append(allSpecs(), wfSpecs()...) {
		body, err := fs.ReadFile(luaFS, "lua/"+spec.name+".lua")
		require.NoError(t, err)
		src := string(body)
		firstWrite := len(src)
		for _, w := range []string{"save(", "redis.call('HSET'", "redis.call('ZADD'", "redis.call('LPUSH'", "redis.call('ZREM'",
			"redis.call('HDEL'", "redis.call('UNLINK'", "promote_due(", "pop_pending(", "count(", "redis.call('XADD'", "redis.call('HSETNX'"} {
			if i := strings.Index(src, w); i >= 0 && i < firstWrite {
				firstWrite = i
			}
		}
		fixed := spec.args[:spec.fixedArgs()-len(commonArgs)]
		for _, a := range fixed {
			if a == "n" || strings.HasPrefix(a, "id") || a == "token" || a == "kind" || a == "payload" || a == "spec" ||
				a == "when" || a == "idem" || a == "result" || a == "error" || a == "mode" || a == "cursor_score" ||
				a == "cursor_id" || a == "request" || a == "claim_token" || a == "token_base" || a == "want_next" ||
				a == "dead" || a == "force" || a == "status" || a == "cursor_num" || a == "retry_at" || a == "eligible" || a == "up" || a == "brief" || a == "key" || a == "value" {
				continue // strings, or read by comparison only
			}
			i := strings.Index(src, "A_"+a)
			require.True(t, i >= 0 && i < firstWrite, "%s.lua reads numeric argument %s only after its first write", spec.name, a)
		}
	}
}

// Each script is sent with only the definitions of common.lua it uses
// (commonFor): none may read a name that neither it nor Lua defines, which
// Redis would find only when that line runs. The check is lexical: every
// identifier outside comments and strings, not a field (after "." or ":")
// nor a table constructor's key, must be a keyword, a global Redis's Lua
// has, or declared in the script (local, a function's parameter, a loop's
// variable).
func TestScriptsReadNoUndeclaredGlobal(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{}
	for _, w := range strings.Fields(`and break do else elseif end false for function if in local nil not or
		repeat return then true until while redis KEYS ARGV string table math tonumber tostring type ipairs pairs
		unpack next select error pcall cjson bit`) {
		allowed[w] = true
	}
	ident := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	declLocal := regexp.MustCompile(`\blocal\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
	declParams := regexp.MustCompile(`\bfunction\s*[A-Za-z_0-9]*\s*\(([^)]*)\)`)
	declFor := regexp.MustCompile(`\bfor\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:=|in)`)
	for _, spec := range append(append(allSpecs(), wfSpecs()...), globalSpecs()...) {
		src := stripLuaCommentsAndStrings(scriptSource(spec))
		declared := map[string]bool{}
		for _, re := range []*regexp.Regexp{declLocal, declParams, declFor} {
			for _, m := range re.FindAllStringSubmatch(src, -1) {
				for _, n := range strings.Split(m[1], ",") {
					declared[strings.TrimSpace(n)] = true
				}
			}
		}
		for _, loc := range ident.FindAllStringIndex(src, -1) {
			w := src[loc[0]:loc[1]]
			if allowed[w] || declared[w] {
				continue
			}
			before := strings.TrimRight(src[:loc[0]], " \t\n")
			after := strings.TrimLeft(src[loc[1]:], " \t\n")
			if strings.HasSuffix(before, ".") && !strings.HasSuffix(before, "..") || strings.HasSuffix(before, ":") {
				continue // a field or method
			}
			if (strings.HasSuffix(before, "{") || strings.HasSuffix(before, ",")) && strings.HasPrefix(after, "=") &&
				!strings.HasPrefix(after, "==") {
				continue // a table constructor's key
			}
			t.Errorf("%s.lua, as sent, reads %s, which it does not define", spec.name, w)
		}
	}
}

// new_record's constructor spells out one empty field a record field.
func TestNewRecordHasEveryField(t *testing.T) {
	t.Parallel()
	body, err := fs.ReadFile(luaFS, "lua/common.lua")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^local function new_record\(\)\n  return \{ ((?:'', )*'') \}\n`).FindStringSubmatch(string(body))
	require.NotNil(t, m, "new_record's constructor")
	require.Equal(t, len(RecFields), strings.Count(m[1], "''"))
}

// Every script sent with common.lua's hook (directly, or through kill and
// cancel_now) declares the hooks outbox it writes, and every script that
// ends or retries a job is one of them.
func TestScriptsThatEndJobsWriteTheHooksOutbox(t *testing.T) {
	t.Parallel()
	var with []string
	for _, spec := range allSpecs() {
		if strings.Contains(scriptSource(spec), "local function hook_open(") {
			require.Contains(t, spec.keys, KeyHooks, "%s.lua may write the hooks outbox without declaring it", spec.name)
			with = append(with, spec.name)
		}
	}
	slices.Sort(with)
	require.Equal(t, []string{"cancel", "complete", "enqueue", "fail", "reclaim", "release", "wfack", "wfnode"}, with)
}
