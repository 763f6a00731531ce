package testutil

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvRedis names the variable that, set to "embedded", makes [RedisAddr]
// and [Redis] answer with the embedded in-memory Redis (one a test, shared
// with its subtests) that `chronoq serve` runs when it is given no
// Redis (github.com/alicebob/miniredis, whose scripts run on gopher-lua)
// instead of starting redis-server: `make test-embedded` runs the
// single-Redis contract suites and the HTTP API suite that way, so that
// the zero-setup default keeps the contract the real Redis keeps. Tests
// that need what only a redis-server process has (a Cluster, a process to
// stop or kill, CLIENT LIST) skip in this mode and say why
// ([NeedRedisServer]).
const EnvRedis = "CHRONOQ_TEST_REDIS"

// Embedded reports whether this test binary runs against the embedded
// Redis (CHRONOQ_TEST_REDIS=embedded).
func Embedded() bool {
	return strings.TrimSpace(os.Getenv(EnvRedis)) == "embedded"
}

// NeedRedisServer skips t when the binary runs against the embedded Redis,
// saying why: what names what only a redis-server process has ("a Redis
// Cluster", "a process to kill", "CLIENT LIST").
func NeedRedisServer(t testing.TB, what string) {
	t.Helper()
	if Embedded() {
		t.Skipf("needs %s, which only redis-server has (%s=embedded)", what, EnvRedis)
	}
}

// embedded holds the embedded Redis servers of CHRONOQ_TEST_REDIS=embedded:
// one a test, by test name, which its subtests share (see embeddedAddr),
// and one for the runnable examples.
var embedded struct {
	mu      sync.Mutex
	byTest  map[string]*miniredis.Miniredis
	example *miniredis.Miniredis
}

// embeddedAddr answers the address of t's embedded Redis: its own, or
// that of the nearest enclosing test that has one, started now when none
// has. A test per server, not one for the binary: the embedded Redis
// runs each script alone under one lock (compiling it each time), so a
// server shared by a package's parallel tests makes every call wait for
// the others', and the tests that read Redis's clock against a fake one
// would see seconds pass. t nil: the examples' server, stopped by [Main].
func embeddedAddr(t testing.TB) (string, error) {
	embedded.mu.Lock()
	defer embedded.mu.Unlock()
	if t == nil {
		if embedded.example == nil {
			m, err := miniredis.Run()
			if err != nil {
				return "", fmt.Errorf("testutil: start the embedded Redis: %w", err)
			}
			embedded.example = m
		}
		return embedded.example.Addr(), nil
	}
	for name := t.Name(); ; {
		if m, ok := embedded.byTest[name]; ok {
			return m.Addr(), nil
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", fmt.Errorf("testutil: start the embedded Redis: %w", err)
	}
	if embedded.byTest == nil {
		embedded.byTest = map[string]*miniredis.Miniredis{}
	}
	name := t.Name()
	embedded.byTest[name] = m
	t.Cleanup(func() {
		embedded.mu.Lock()
		delete(embedded.byTest, name)
		embedded.mu.Unlock()
		m.Close()
	})
	return m.Addr(), nil
}

// stopEmbedded stops the examples' embedded Redis when one was started.
func stopEmbedded() {
	embedded.mu.Lock()
	defer embedded.mu.Unlock()
	if embedded.example != nil {
		embedded.example.Close()
		embedded.example = nil
	}
}

// EmbeddedRedis returns a client to an embedded in-memory Redis of t's own
// (miniredis, as `chronoq serve` runs without a Redis), closed with it at
// t.Cleanup, whatever CHRONOQ_TEST_REDIS says: for the tests that pin
// down where that Redis differs from redis-server (its Lua is gopher-lua).
func EmbeddedRedis(t testing.TB) *redis.Client {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("testutil: start an embedded Redis: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close(); m.Close() })
	return rdb
}
