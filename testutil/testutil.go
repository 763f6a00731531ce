package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/chronoq/chronoq/internal/clockskew"
	"github.com/chronoq/chronoq/testutil/redisproc"
)

const (
	// EnvRedisAddr names an existing redis-server (host:port) to use instead
	// of starting one.
	EnvRedisAddr = "CHRONOQ_TEST_REDIS_ADDR"
	// EnvClusterAddrs names the comma-separated seed addresses of an
	// existing Redis Cluster to use instead of starting one.
	EnvClusterAddrs = "CHRONOQ_TEST_CLUSTER_ADDRS"
)

// shared holds the processes and directories started for the whole test
// binary; Main releases them.
var shared struct {
	mu    sync.Mutex
	procs []*redisproc.Server
	dirs  []string
}

// readyTimeout bounds how long a freshly started redis-server may take to
// answer.
const readyTimeout = 10 * time.Second

func registerShared(p *redisproc.Server) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.procs = append(shared.procs, p)
}

// sharedDir creates a temporary directory removed by Main.
func sharedDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.dirs = append(shared.dirs, dir)
	return dir, nil
}

// Main runs the package's tests, stops every server this package started,
// and then, when the tests passed, fails the run if any goroutine is left
// behind (go.uber.org/goleak). Use as:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
//
// A leaked goroutine is a bug: a loop nobody stopped, a client nobody
// closed, a request whose body nobody read. opts are more goleak options
// for a package whose tests knowingly leave one running (say why where
// you pass them); the defaults are in [LeakOptions].
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	// The shared servers' goroutines (their process waiters) end here, so
	// they are not taken for leaks.
	stopShared()
	stopEmbedded()
	if code == 0 {
		if err := goleak.Find(append(LeakOptions(), opts...)...); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: goroutines left running after the tests passed: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LeakOptions are the goleak options [Main] always applies: the goroutines
// that are expected to outlive every test of a binary, and nothing else.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// The thread that starts redis-server children must outlive them
		// (their Pdeathsig is tied to it), so it never ends.
		goleak.IgnoreTopFunction(redisproc.SpawnerFunc),
	}
}

// stopShared stops all shared servers (in parallel) and removes their
// directories.
func stopShared() {
	shared.mu.Lock()
	procs, dirs := shared.procs, shared.dirs
	shared.procs, shared.dirs = nil, nil
	shared.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.Stop)
	}
	wg.Wait()
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

var single struct {
	once sync.Once
	addr string
	err  error
}

// RedisAddr returns host:port of the shared single redis-server for this
// test binary.
//
// If CHRONOQ_TEST_REDIS_ADDR is set, that server is used instead (not
// started, not stopped). Otherwise the first call starts redis-server on
// 127.0.0.1 and a free port, without persistence, and waits until it answers
// PING; later calls (from any test) return the same address. With
// CHRONOQ_TEST_REDIS=embedded it is the address of an embedded in-memory
// Redis instead, the test's own, shared with its subtests (see
// [EnvRedis]).
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr, err := redisAddr(t)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// ExampleRedisAddr is [RedisAddr] for code that has no testing.TB: the
// package's runnable examples. It panics where RedisAddr fails the test.
// The server is stopped by [Main] like any other.
func ExampleRedisAddr() string {
	addr, err := redisAddr(nil)
	if err != nil {
		panic(err)
	}
	return addr
}

func redisAddr(t testing.TB) (string, error) {
	if addr := strings.TrimSpace(os.Getenv(EnvRedisAddr)); addr != "" {
		return addr, nil
	}
	if Embedded() {
		return embeddedAddr(t)
	}
	single.once.Do(func() { single.addr, single.err = startSingle() })
	return single.addr, single.err
}

func startSingle() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%s or set %s", redisproc.NotFound, EnvRedisAddr)
	}
	dir, err := sharedDir("chronoq-redis-*")
	if err != nil {
		return "", fmt.Errorf("testutil: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	p, err := redisproc.Start(ctx, "redis-server", bin, dir, nil, false)
	if err != nil {
		return "", fmt.Errorf("testutil: start shared redis-server: %w", err)
	}
	registerShared(p)
	return p.Addr, nil
}

// Redis returns a new client to the shared server (see [RedisAddr]),
// closed at t.Cleanup.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// namespaceMax is the maximum length of a namespace.
const namespaceMax = 64

// issued remembers the namespaces handed out by this binary, making them
// certainly (not just probably) unique within it.
var issued sync.Map

// Namespace returns a key namespace unique to this test, and, thanks to a
// random suffix, also unique across test binaries running concurrently
// against one server: "t" + the sanitized test name (without its "Test"
// prefix, shortened if needed) + "-" + 8 random hex characters, e.g.
// "tEnqueue_retry-9f86d081".
//
// The result consists only of [a-zA-Z0-9_-] (a subset of the promised
// [a-zA-Z0-9:_-]), never contains '{' or '}', and is at most 64 characters.
// Each call returns a new namespace.
func Namespace(t testing.TB) string {
	t.Helper()
	return namespace(strings.TrimPrefix(t.Name(), "Test"))
}

// ExampleNamespace is [Namespace] for code that has no testing.TB, the
// runnable examples: a fresh namespace "t" + name + "-" + 8 random hex
// characters, so that an example's keys never meet those of a test or of
// an earlier run on a shared server.
func ExampleNamespace(name string) string { return namespace(name) }

func namespace(name string) string {
	name = sanitize(name)
	const suffixLen = 1 + 8 // "-" + hex
	if maxName := namespaceMax - 1 - suffixLen; len(name) > maxName {
		name = name[:maxName]
	}
	for {
		var b [4]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		ns := "t" + name + "-" + hex.EncodeToString(b[:])
		if _, dup := issued.LoadOrStore(ns, struct{}{}); !dup {
			return ns
		}
	}
}

// sanitize maps every character outside [a-zA-Z0-9_-] (such as the '/' of
// subtest names) to '_'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		default:
			return '_'
		}
	}, s)
}

// fakeInstant is the time FakeClock starts at.
var fakeInstant = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// FakeClock returns a new clockwork fake clock set to
// 2030-01-02T03:04:05Z (a fixed instant, so that tests are reproducible).
// A queue client given it as Config.Clock moves Redis's clock with it
// only with Config.FollowClock set.
func FakeClock() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(fakeInstant)
}

// SkewedClock is the real clock read off by skew: an instance whose clock
// is wrong (NTP drift, a paused VM, a container with a bad clock). Its
// timers run in real time. (The chaos battery's skewed processes use the
// same clock, package internal/clockskew.)
func SkewedClock(skew time.Duration) clockwork.Clock { return clockskew.New(skew) }

// RedisTime reads Redis's clock (TIME), the one that decides what is due.
func RedisTime(t testing.TB, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("testutil: TIME: %v", err)
	}
	return now
}

// RequireDueAfter fails t unless due, a due time kept to the millisecond,
// is d after an instant in [from, to]: readings of Redis's clock taken
// before and after the call that set it.
func RequireDueAfter(t testing.TB, due, from, to time.Time, d time.Duration) {
	t.Helper()
	if due.Before(from.Add(d).Truncate(time.Millisecond)) || due.After(to.Add(d)) {
		t.Fatalf("due %s: not %s after an instant in [%s, %s] (Redis's clock)", due, d, from, to)
	}
}
