package queue

import (
	"context"
	"embed"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// luaScript is one Lua file, sent as its generated prelude (see
// scriptSpec.prelude), lua/common.lua and its own body.
type luaScript struct {
	spec scriptSpec
	s    *redis.Script
}

// scriptsByName holds every script, and scriptHashes each one's SHA1 as
// EVALSHA sends it, by name.
var (
	scriptsByName = map[string]*luaScript{}
	scriptHashes  = map[string]string{}
)

func newScript(spec scriptSpec) *luaScript {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	body, err := luaFS.ReadFile("lua/" + spec.name + ".lua")
	if err != nil {
		panic(err)
	}
	s := redis.NewScript(spec.prelude() + string(common) + "\n" + string(body))
	ls := &luaScript{spec: spec, s: s}
	scriptsByName[spec.name], scriptHashes[spec.name] = ls, s.Hash()
	return ls
}

var (
	createScript     = newScript(specCreate)
	enqueueScript    = newScript(specEnqueue)
	promoteScript    = newScript(specPromote)
	claimScript      = newScript(specClaim)
	waitScript       = newScript(specWait)
	completeScript   = newScript(specComplete)
	failScript       = newScript(specFail)
	heartbeatScript  = newScript(specHeartbeat)
	releaseScript    = newScript(specRelease)
	reclaimScript    = newScript(specReclaim)
	listScript       = newScript(specList)
	cancelScript     = newScript(specCancel)
	rescheduleScript = newScript(specReschedule)
	runNowScript     = newScript(specRunNow)
	deadScript       = newScript(specDead)
	deleteScript     = newScript(specDelete)
)

// Retrying a cluster in motion. While a queue's slot migrates, Redis
// answers a script ASK (go-redis follows it), MOVED (go-redis follows it
// and refreshes its slot map) or TRYAGAIN (the queue's keys are split
// between the two nodes for the moment). None of them ran the script, so
// run tries again, backing off from 1 ms to at most 100 ms a wait, for as
// long as ctx allows and at most clusterRetryFor: a caller sees latency
// during a migration, not an error. (CLUSTERDOWN is an outage, not a
// migration: it is answered as ErrUnavailable, as before.)
const (
	clusterRetryFor      = 2 * time.Minute
	clusterRetryMaxSleep = 100 * time.Millisecond
)

// migrating reports whether err is Redis saying the slot is moving.
func migrating(err error) bool {
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

// run runs a script on the keys of k with the common arguments in front of
// args, and applies the attention marks its reply carries (see
// attention.go), answering the reply without them. Script.Run sends
// EVALSHA and falls back to EVAL when the server has lost its script cache
// (restart, failover, SCRIPT FLUSH; per node in a cluster).
func (c *Client) run(ctx context.Context, sc *luaScript, k keys, args ...any) (any, error) {
	argv := sc.spec.argv([]any{c.timeOffset(), c.pubcmd, k.events}, args)
	ks := sc.spec.keysOf(k)
	var v any
	err := retryMigration(ctx, func() error {
		var err error
		v, err = sc.s.Run(ctx, c.rdb, ks, argv...).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	v, m := unwrapMarks(v)
	c.mark(ctx, k.name, m)
	return v, nil
}

// retryMigration runs f until it answers anything but a migration (see
// migrating), for as long as ctx allows and at most clusterRetryFor.
// Errors from Redis are wrapped as wrapRedis does.
func retryMigration(ctx context.Context, f func() error) error {
	var deadline time.Time
	sleep := time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if !migrating(err) {
			return wrapRedis(err)
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(clusterRetryFor)
		}
		if now.After(deadline) {
			return wrapRedis(err)
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
		strings.HasPrefix(msg, "ERR chronoq ") || strings.Contains(msg, "user_script") {
		return err // a script bug or a malformed call, not an outage
	}
	return unavailableError{err}
}
