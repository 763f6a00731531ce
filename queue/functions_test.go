package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The per-queue scripts run as functions of one library on a Redis that
// has them (7.0 and later), and as EVALSHA scripts on one that has not
// (the embedded Redis): the same calls, the same answers (see library.go
// in internal/store).
func TestScriptsRunAsFunctionsWhereRedisHasThem(t *testing.T) {
	t.Parallel()
	// work enqueues, claims and completes a job.
	work := func(t *testing.T, c *queue.Client, q string) {
		t.Helper()
		ctx := context.Background()
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k"})
		require.NoError(t, err)
		js, err := c.Claim(ctx, q, queue.ClaimOptions{})
		require.NoError(t, err)
		require.Len(t, js, 1)
		require.NoError(t, c.Complete(ctx, q, js[0].ID, js[0].Token, queue.CompleteOptions{}))
	}
	t.Run("RedisServer", func(t *testing.T) {
		t.Parallel()
		testutil.NeedRedisServer(t, "functions")
		rdb := testutil.Redis(t)
		c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		work(t, c, "q") // the queue exists, the library is loaded
		before := commandStats(t, context.Background(), rdb)
		work(t, c, "q")
		after := commandStats(t, context.Background(), rdb)
		require.GreaterOrEqual(t, after["fcall"].calls-before["fcall"].calls, int64(3), "enqueue, claim and complete by FCALL")
	})
	t.Run("Embedded", func(t *testing.T) {
		t.Parallel()
		rdb := testutil.EmbeddedRedis(t)
		c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		work(t, c, "q")
		// miniredis counts no commands: the calls' answers are the check
		// (work requires them), and that it has no library to take.
		_, err = rdb.Do(context.Background(), "FUNCTION", "LIST").Result()
		require.Error(t, err, "the embedded Redis has no functions")
	})
}

// A server that lost the library (a restart without persistence,
// FUNCTION FLUSH, a cluster node that joined since) answers FCALL "Function
// not found": the client loads the library again and the call goes on,
// with nothing lost or done twice.
func TestALostLibraryIsLoadedAgain(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "functions")
	ctx := context.Background()
	rdb := testutil.Redis(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	// Other tests' clients share this server: take only this library out
	// (chronoq_<hash>, the one the client loaded), as FUNCTION FLUSH would.
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "chronoq_*"}).Result()
	require.NoError(t, err)
	require.NotEmpty(t, libs, "the library was loaded")
	for _, l := range libs {
		require.NoError(t, rdb.FunctionDelete(ctx, l.Name).Err())
	}
	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	require.False(t, e.Replayed)
	js, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Len(t, js, 2, "both jobs, each once")
	libs, err = rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "chronoq_*"}).Result()
	require.NoError(t, err)
	require.NotEmpty(t, libs, "loaded again")
}

// An error a script raises is its own answer (a bug or a malformed call,
// which wrote nothing), by EVAL and by FCALL alike, not an outage to
// retry; a server that does not answer is one.
func TestScriptErrorsAreToldFromOutages(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "functions")
	ctx := context.Background()
	rdb := testutil.Redis(t)
	_, err := rdb.Eval(ctx, `error('chronoq: boom')`, nil).Result()
	require.Error(t, err)
	require.True(t, store.IsScriptError(err), "%v", err)
	// a library of this test's own (function names are global to the server)
	name := strings.NewReplacer("-", "_").Replace(testutil.Namespace(t))
	require.NoError(t, rdb.FunctionLoad(ctx, "#!lua name="+name+"\n"+
		"redis.register_function('"+name+"_boom', function(keys, args) error('chronoq: boom') end)").Err())
	t.Cleanup(func() { _ = rdb.FunctionDelete(context.Background(), name).Err() })
	_, err = rdb.FCall(ctx, name+"_boom", nil).Result()
	require.Error(t, err)
	require.True(t, store.IsScriptError(err), "%v", err)
	require.NotErrorIs(t, store.WrapRedis(err), store.ErrUnavailable)

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	err = down.Ping(ctx).Err()
	require.Error(t, err)
	require.False(t, store.IsScriptError(err))
	require.ErrorIs(t, store.WrapRedis(err), store.ErrUnavailable)
}
