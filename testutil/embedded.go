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

// EnvRedis, set to "embedded", makes [RedisAddr] and [Redis] answer with
// the embedded in-memory Redis `chronoq serve` runs when it is given no
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

var embedded struct {
	once sync.Once
	m    *miniredis.Miniredis
	err  error
}

// embeddedAddr starts the binary's shared embedded Redis at the first call
// and returns its address; [Main] stops it.
func embeddedAddr() (string, error) {
	embedded.once.Do(func() {
		embedded.m, embedded.err = miniredis.Run()
		if embedded.err != nil {
			embedded.err = fmt.Errorf("testutil: start the embedded Redis: %w", embedded.err)
		}
	})
	if embedded.err != nil {
		return "", embedded.err
	}
	return embedded.m.Addr(), nil
}

// stopEmbedded stops the shared embedded Redis when one was started.
func stopEmbedded() {
	if embedded.m != nil {
		embedded.m.Close()
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
