package queue

import (
	"context"
	"embed"
	"errors"
	"maps"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scriptHashes maps each script's name to its SHA1, as EVALSHA sends it.
var scriptHashes = map[string]string{}

// ScriptHashes answers each of the package's scripts by name with its SHA1
// (the EVALSHA argument), for tools that watch the traffic to Redis (the
// chaos battery names the requests its proxy drops).
func ScriptHashes() map[string]string { return maps.Clone(scriptHashes) }

// script is one Lua file with lua/common.lua in front of it.
func script(name string) *redis.Script {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	s := redis.NewScript(string(common) + "\n" + string(body))
	scriptHashes[name] = s.Hash()
	return s
}

var (
	enqueueScript   = script("enqueue")
	promoteScript   = script("promote")
	claimScript     = script("claim")
	activateScript  = script("activate")
	completeScript  = script("complete")
	failScript      = script("fail")
	heartbeatScript = script("heartbeat")
	reclaimScript   = script("reclaim")
	releaseScript   = script("release")

	// Job management (manage.go).
	listScript       = script("list")
	cancelScript     = script("cancel")
	rescheduleScript = script("reschedule")
	runNowScript     = script("runnow")
	deadScript       = script("dead")
)

// run runs a script with the common arguments in front of args. Script.Run
// sends EVALSHA and falls back to EVAL when the server has lost its script
// cache (restart, failover, SCRIPT FLUSH; per node in a cluster).
func (c *Client) run(ctx context.Context, s *redis.Script, k keys, now int64, keys []string, args ...any) (any, error) {
	all := make([]any, 0, 4+len(args))
	all = append(all, k.prefix, now, c.pubcmd, k.events)
	all = append(all, args...)
	v, err := s.Run(ctx, c.rdb, keys, all...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis(err)
	}
	return v, nil
}

// boolArg is a flag as the scripts read it: "1" or "0".
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ErrUnavailable wraps errors from Redis (unreachable, timed out, failing
// over): the operation may be retried.
var ErrUnavailable = errors.New("redis unavailable")

type unavailableError struct{ err error }

func (e unavailableError) Error() string { return "queue: redis: " + e.err.Error() }
func (e unavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.err}
}

func wrapRedis(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if msg := err.Error(); strings.HasPrefix(msg, "ERR Error running script") || strings.HasPrefix(msg, "ERR Error compiling script") ||
		strings.Contains(msg, "user_script") {
		return err // a script bug, not an outage
	}
	return unavailableError{err}
}
