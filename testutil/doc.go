// Package testutil starts and shares the real Redis servers that chronoq's
// tests run against.
//
// # Why
//
// chronoq is a job queue built on Redis: Lua scripts, MULTI/EXEC, blocking
// commands, key expiry and Redis Cluster hash slots are all part of its
// contract. An in-memory fake cannot prove that a script is atomic, that every
// key it touches shares one hash slot, or that the queue survives a Redis
// restart, so the tests use a real redis-server (and a real 3-master Redis
// Cluster) started on free loopback ports. This package hides that plumbing so
// a test only asks for an address or a client.
//
// # Usage
//
// Every package routes its TestMain through [Main], which stops the shared
// servers and removes their directories after the tests ran (without it the
// servers still die with the test binary, see Processes below, but their
// temporary directories are left behind), and then fails a passing run that
// left a goroutine behind (go.uber.org/goleak; [LeakOptions] are the known
// long-lived ones):
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
//
// A test then asks for a client and a private key namespace:
//
//	func TestEnqueue(t *testing.T) {
//		t.Parallel()
//		rdb := testutil.Redis(t)      // *redis.Client, closed at t.Cleanup
//		ns := testutil.Namespace(t)   // e.g. "tEnqueue-1f2e3d4c"
//		clock := testutil.FakeClock() // 2030-01-02T03:04:05Z
//		err := rdb.Set(t.Context(), ns+":k", "v", 0).Err()
//		require.NoError(t, err)
//		...
//	}
//
// Runnable examples, which have no testing.TB, use [ExampleRedisAddr] and
// [ExampleNamespace] instead of [RedisAddr] and [Namespace].
//
// Cluster tests use [Cluster] (or [ClusterAddrs]) instead of [Redis]. Tests
// that must stop, kill or restart Redis use [StartServer], which gives the
// test a redis-server of its own. Tests that move a hash slot from one
// master to another while their load runs use [StartCluster], which gives
// the test a cluster of its own (3 masters, about a second to start) with
// [PrivateCluster.MigrateSlot]: moving a slot of the shared cluster would
// disturb the parallel tests whose keys live in it.
//
// # Sharing and isolation
//
// One redis-server and one 3-master cluster are started lazily, at most once
// per test binary, by the first test that needs them, and are shared by all
// tests of that binary. Tests never FLUSHALL: each one works under its own
// [Namespace], so tests may call t.Parallel() and several test binaries
// (go test ./...) may even share one server. Namespaces never contain '{' or
// '}', so callers are free to wrap them in a hash tag.
//
// # External servers
//
// Set CHRONOQ_TEST_REDIS_ADDR=host:port to use an existing redis-server, and
// CHRONOQ_TEST_CLUSTER_ADDRS=host:port,host:port,... to use an existing
// cluster. Such servers are neither started nor stopped by this package, and
// [StartServer] still needs redis-server on PATH.
//
// # The embedded Redis
//
// Set CHRONOQ_TEST_REDIS=embedded to run a package's single-Redis tests on
// the embedded in-memory Redis `chronoq serve` may run (miniredis, whose
// scripts run on gopher-lua) instead: [RedisAddr] and [Redis] then answer
// with one of a test's own, which its subtests share. [StartServer],
// [Cluster] and [StartCluster] skip there, as does any test that calls
// [NeedRedisServer], saying what it needs. `make test-embedded` runs the
// queue's single-Redis contract suites and the HTTP API suite this way;
// [EmbeddedRedis] gives a test an embedded Redis of its own in any mode.
//
// # Processes
//
// Servers listen on 127.0.0.1 only, with persistence disabled
// (--save "" --appendonly no) unless a test passes other arguments to
// [StartServer]. Each one writes its log to redis.log in its own temporary
// directory; when a server fails to start, the tail of that log is part of
// the test failure. Every child process is started with
// Pdeathsig=SIGKILL and in its own process group, so nothing is left running
// even if the test binary crashes or is killed by go test -timeout. Startup
// and shutdown waits are bounded; a port lost to a concurrent process between
// choosing it and binding it is retried with a new port.
// The processes themselves are package testutil/redisproc's, which the
// chaos battery and the benchmark share. The test machinery lives under
// this folder, apart from the runtime code: redisproc, clockskew (clocks
// wrong on purpose) and chaos (the fault-injection battery); no runtime
// package imports them.
//
// Functions taking a testing.TB call t.Fatal on failure and therefore must be
// called from the test's goroutine; the same holds for the methods of
// [Server].
package testutil
