package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestKeySlotCRC16(t *testing.T) {
	t.Parallel()
	// The check value of CRC-16/XMODEM, which the Redis Cluster
	// specification quotes for its key hash.
	require.Equal(t, uint16(0x31C3), crc16("123456789"))
	require.Equal(t, KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"))
	require.Equal(t, KeySlot("foo"), KeySlot("{foo}"), "a hash tag hashes as its content")
	require.Equal(t, KeySlot("{}bar"), int(crc16("{}bar")%Slots), "an empty tag is no tag")
	require.Equal(t, KeySlot("bar"), KeySlot("{bar}{zap}"), "the first tag counts")
}

func TestParseClusterNodes(t *testing.T) {
	t.Parallel()
	const reply = `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004,host4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@40003 master - 0 1426238318243 3 connected 10923-16383
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@40005 slave,fail 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [17->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [93-<-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
`
	nodes := ParseClusterNodes(reply)
	require.Len(t, nodes, 5)
	require.Equal(t, "127.0.0.1:30004", nodes[0].Addr, "bus port and hostname cut")
	require.False(t, nodes[0].Master)
	require.True(t, nodes[3].Failed)
	me := nodes[4]
	require.True(t, me.Myself)
	require.True(t, me.Master)
	require.Equal(t, [][2]int{{0, 5460}}, me.Slots)
	require.Equal(t, map[int]string{17: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"}, me.Migrating)
	require.Equal(t, map[int]string{93: "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"}, me.Importing)
	owner, ok := OwnerOf(nodes, 17)
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:30001", owner.Addr, "a migrating slot still belongs to its source")
	owner, ok = OwnerOf(nodes, 10922)
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:30002", owner.Addr)
}

// testCluster is the cluster of TestMigrateSlot: 3 masters with a replica
// each, so that replicas must learn every move too.
type testCluster struct {
	addrs   []string
	masters []string
}

func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	nodes, err := StartCluster(clusterCtx(t), redisServer(t), redisCLI(t), t.TempDir(), 3, 1, 5*time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range nodes {
			wg.Go(s.Stop)
		}
		wg.Wait()
	})
	c := &testCluster{}
	for _, s := range nodes {
		c.addrs = append(c.addrs, s.Addr)
	}
	view, err := ClusterNodes(c.addrs[0])
	require.NoError(t, err)
	for _, n := range view {
		if n.Master {
			c.masters = append(c.masters, n.Addr)
		}
	}
	require.Len(t, c.masters, 3)
	return c
}

// route answers the master serving slot and another one.
func (c *testCluster) route(t *testing.T, slot int) (from, to string) {
	t.Helper()
	owner, err := SlotOwner(c.addrs[0], slot)
	require.NoError(t, err)
	for _, m := range c.masters {
		if m != owner.Addr {
			return owner.Addr, m
		}
	}
	t.Fatal("no other master")
	return "", ""
}

// requireOwner checks that every node names want as the master of slot
// and marks it neither migrating nor importing.
func (c *testCluster) requireOwner(t *testing.T, slot int, want string) {
	t.Helper()
	for _, a := range c.addrs {
		nodes, err := ClusterNodes(a)
		require.NoError(t, err)
		owner, ok := OwnerOf(nodes, slot)
		require.True(t, ok, "%s knows no master of slot %d", a, slot)
		require.Equal(t, want, owner.Addr, "the master of slot %d as %s sees it", slot, a)
		for _, n := range nodes {
			if n.Myself {
				require.Empty(t, n.Migrating[slot], "%s marks slot %d migrating", a, slot)
				require.Empty(t, n.Importing[slot], "%s marks slot %d importing", a, slot)
			}
		}
	}
}

func (c *testCluster) client(t *testing.T) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// fill writes n keys of each type (string, list, zset, hash) under tag.
func fill(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, tag string, n int) {
	t.Helper()
	for i := range n {
		p := fmt.Sprintf("{%s}:%d:", tag, i)
		require.NoError(t, rdb.Set(ctx, p+"s", "v"+strconv.Itoa(i), 0).Err())
		require.NoError(t, rdb.RPush(ctx, p+"l", "a", i, "c").Err())
		require.NoError(t, rdb.ZAdd(ctx, p+"z", redis.Z{Score: float64(i), Member: "m"}, redis.Z{Score: -1, Member: "n"}).Err())
		require.NoError(t, rdb.HSet(ctx, p+"h", "f", i, "g", "x").Err())
	}
}

// checkFilled checks the keys fill wrote.
func checkFilled(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, tag string, n int) {
	t.Helper()
	for i := range n {
		p := fmt.Sprintf("{%s}:%d:", tag, i)
		s, err := rdb.Get(ctx, p+"s").Result()
		require.NoError(t, err)
		require.Equal(t, "v"+strconv.Itoa(i), s)
		l, err := rdb.LRange(ctx, p+"l", 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []string{"a", strconv.Itoa(i), "c"}, l)
		z, err := rdb.ZRangeWithScores(ctx, p+"z", 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []redis.Z{{Score: -1, Member: "n"}, {Score: float64(i), Member: "m"}}, z)
		h, err := rdb.HGetAll(ctx, p+"h").Result()
		require.NoError(t, err)
		require.Equal(t, map[string]string{"f": strconv.Itoa(i), "g": "x"}, h)
	}
}

// writer keeps one key of each type growing, and reads each back, until
// stop is closed (at most maxOps rounds, 60 s): the client's view of the
// slot while it moves. It counts each round in progress, and answers the
// rounds done and the errors seen.
func writer(rdb *redis.ClusterClient, tag string, g int, stop <-chan struct{}, progress *atomic.Int64) (rounds int, errs []error) {
	const maxOps = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := fmt.Sprintf("{%s}:w%d:", tag, g)
	check := func(err error, what string, got, want any) bool {
		if err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
			err = fmt.Errorf("%s is %v, want %v", what, got, want)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writer %d round %d: %s: %w", g, rounds, what, err))
		}
		return err == nil
	}
	for rounds < maxOps && ctx.Err() == nil {
		select {
		case <-stop:
			return rounds, errs
		default:
		}
		i := rounds + 1
		n, err := rdb.Incr(ctx, p+"s").Result()
		ok := check(err, "INCR", n, i)
		n, err = rdb.RPush(ctx, p+"l", i).Result()
		ok = check(err, "RPUSH", n, i) && ok
		n, err = rdb.ZAdd(ctx, p+"z", redis.Z{Score: float64(i), Member: i}).Result()
		ok = check(err, "ZADD", n, 1) && ok
		n, err = rdb.HSet(ctx, p+"h", strconv.Itoa(i), i).Result()
		ok = check(err, "HSET", n, 1) && ok
		// A new key each round: created on the target once the source
		// has sent the client there (ASK).
		err = rdb.Set(ctx, p+"new:"+strconv.Itoa(i), i, 0).Err()
		ok = check(err, "SET new", "", "") && ok
		s, err := rdb.Get(ctx, p+"s").Result()
		ok = check(err, "GET", s, i) && ok
		n, err = rdb.LLen(ctx, p+"l").Result()
		ok = check(err, "LLEN", n, i) && ok
		n, err = rdb.ZCard(ctx, p+"z").Result()
		ok = check(err, "ZCARD", n, i) && ok
		n, err = rdb.HLen(ctx, p+"h").Result()
		ok = check(err, "HLEN", n, i) && ok
		if !ok {
			return rounds, errs // the model is off by now: stop counting
		}
		rounds = i
		progress.Add(1)
	}
	return rounds, errs
}

// checkWriter checks what writer g left after rounds rounds.
func checkWriter(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, tag string, g, rounds int) {
	t.Helper()
	p := fmt.Sprintf("{%s}:w%d:", tag, g)
	s, err := rdb.Get(ctx, p+"s").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(rounds), s)
	l, err := rdb.LRange(ctx, p+"l", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, l, rounds)
	for i, v := range l {
		require.Equal(t, strconv.Itoa(i+1), v, "list %d in order", g)
	}
	require.Equal(t, int64(rounds), rdb.ZCard(ctx, p+"z").Val())
	require.Equal(t, int64(rounds), rdb.HLen(ctx, p+"h").Val())
	for i := 1; i <= rounds; i++ {
		v, err := rdb.Get(ctx, p+"new:"+strconv.Itoa(i)).Result()
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(i), v)
	}
}

func TestMigrateSlot(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t)
	rdb := c.client(t)
	ctx := clusterCtx(t)

	t.Run("there and back under load", func(t *testing.T) {
		const tag, static, writers = "mig", 25, 4
		slot := KeySlot(tag)
		home, away := c.route(t, slot)
		fill(ctx, t, rdb, tag, static)
		stop := make(chan struct{})
		rounds := make([]int, writers)
		errs := make([][]error, writers)
		var progress atomic.Int64 // rounds done by every writer
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() { rounds[g], errs[g] = writer(rdb, tag, g, stop, &progress) })
		}
		require.Eventually(t, func() bool { return progress.Load() >= writers }, 10*time.Second, 5*time.Millisecond,
			"the writers are under way before the slot moves")
		before := progress.Load()
		var steps, lastMoved atomic.Int64
		o := MigrateOptions{Slot: slot, From: home, To: away, KeysPerStep: 7, Pause: 10 * time.Millisecond,
			OnStep: func(moved int) { steps.Add(1); lastMoved.Store(int64(moved)) }}
		err := MigrateSlot(ctx, o)
		if err == nil {
			c.requireOwner(t, slot, away)
			o.From, o.To = away, home
			err = MigrateSlot(ctx, o)
		}
		during := progress.Load() - before
		close(stop)
		wg.Wait()
		require.NoError(t, err)
		require.Positive(t, during, "the writers wrote while the slot moved")
		c.requireOwner(t, slot, home)
		for g := range writers {
			require.Empty(t, errs[g], "the client must see no error while the slot moves")
			require.Positive(t, rounds[g])
			checkWriter(ctx, t, rdb, tag, g, rounds[g])
		}
		checkFilled(ctx, t, rdb, tag, static)
		require.Greater(t, steps.Load(), int64(2*4*static/7), "a few keys a step, both ways")
		require.GreaterOrEqual(t, lastMoved.Load(), int64(4*static), "the way back moves every key")
		t.Logf("writers' rounds %v (%d while the slot moved); %d steps", rounds, during, steps.Load())
	})

	t.Run("a key on both sides with equal values is replaced", func(t *testing.T) {
		const tag = "busy"
		slot := KeySlot(tag)
		from, to := c.route(t, slot)
		fill(ctx, t, rdb, tag, 3)
		// A MIGRATE that failed after the target restored the key leaves
		// this behind: the same value on both masters.
		key := "{" + tag + "}:1:l"
		src, dst := dialAdmin(from, doTimeout), dialAdmin(to, doTimeout)
		defer src.close()
		defer dst.close()
		fromID, err := NodeID(from)
		require.NoError(t, err)
		_, err = dst.do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
		require.NoError(t, err)
		payload, err := src.do(ctx, "DUMP", key)
		require.NoError(t, err)
		_, err = dst.asking(ctx, "RESTORE", key, 0, payload)
		require.NoError(t, err)

		require.NoError(t, MigrateSlot(ctx, MigrateOptions{Slot: slot, From: from, To: to, KeysPerStep: 5}))
		c.requireOwner(t, slot, to)
		checkFilled(ctx, t, rdb, tag, 3)
	})

	t.Run("a key on both sides with different values stops the move, open", func(t *testing.T) {
		const tag = "conflict"
		slot := KeySlot(tag)
		from, to := c.route(t, slot)
		fill(ctx, t, rdb, tag, 3)
		key := "{" + tag + "}:2:s"
		dst := dialAdmin(to, doTimeout)
		defer dst.close()
		fromID, err := NodeID(from)
		require.NoError(t, err)
		_, err = dst.do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
		require.NoError(t, err)
		_, err = dst.asking(ctx, "SET", key, "another value")
		require.NoError(t, err)

		o := MigrateOptions{Slot: slot, From: from, To: to, KeysPerStep: 100}
		err = MigrateSlot(ctx, o)
		require.ErrorIs(t, err, ErrKeyConflict)
		require.ErrorIs(t, err, ErrSlotOpen)
		require.ErrorContains(t, err, key)
		// Open: both marks kept, every key reachable through ASK, the
		// conflicting one at its source's value.
		requireMarks(t, from, to, slot)
		checkFilled(ctx, t, rdb, tag, 3)

		// Someone decides: the target's copy goes, and the move resumes.
		_, err = dst.asking(ctx, "DEL", key)
		require.NoError(t, err)
		require.NoError(t, MigrateSlot(ctx, o))
		c.requireOwner(t, slot, to)
		checkFilled(ctx, t, rdb, tag, 3)
	})

	t.Run("cancelled midway leaves the slot open; called again it finishes", func(t *testing.T) {
		const tag = "cancel"
		slot := KeySlot(tag)
		from, to := c.route(t, slot)
		fill(ctx, t, rdb, tag, 5)
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		o := MigrateOptions{Slot: slot, From: from, To: to, KeysPerStep: 3, OnStep: func(int) { cancel() }}
		err := MigrateSlot(mctx, o)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, ErrSlotOpen)
		requireMarks(t, from, to, slot)
		checkFilled(ctx, t, rdb, tag, 5)

		o.OnStep = nil
		require.NoError(t, MigrateSlot(ctx, o))
		c.requireOwner(t, slot, to)
		checkFilled(ctx, t, rdb, tag, 5)
		// Called for a slot the target serves already: nothing to do.
		require.NoError(t, MigrateSlot(ctx, o))
	})

	t.Run("an error before any key moved leaves the slot with its source", func(t *testing.T) {
		const tag = "undo"
		slot := KeySlot(tag)
		from, to := c.route(t, slot)
		fill(ctx, t, rdb, tag, 2)
		host, port, _ := net.SplitHostPort(to)
		m := &migration{o: MigrateOptions{Slot: slot, From: from, To: to}, host: host, port: port,
			src: dialAdmin(from, doTimeout), dst: dialAdmin(to, doTimeout)}
		defer m.src.close()
		defer m.dst.close()
		var err error
		m.srcID, err = NodeID(from)
		require.NoError(t, err)
		m.dstID, err = NodeID(to)
		require.NoError(t, err)
		_, err = m.dst.do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", m.srcID)
		require.NoError(t, err)
		_, err = m.src.do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.dstID)
		require.NoError(t, err)
		cause := errors.New("step failed")
		err = m.stabilize(ctx, cause)
		require.ErrorIs(t, err, cause)
		require.NotErrorIs(t, err, ErrSlotOpen)
		require.ErrorContains(t, err, "stays with "+from)
		c.requireOwner(t, slot, from)
		checkFilled(ctx, t, rdb, tag, 2)
	})

	t.Run("refusals", func(t *testing.T) {
		slot := KeySlot("refuse")
		from, to := c.route(t, slot)
		require.ErrorContains(t, MigrateSlot(ctx, MigrateOptions{Slot: slot, From: from, To: from}), "both")
		var third string
		for _, m := range c.masters {
			if m != from && m != to {
				third = m
			}
		}
		require.ErrorContains(t, MigrateSlot(ctx, MigrateOptions{Slot: slot, From: third, To: to}), "does not serve")
		require.ErrorContains(t, MigrateSlot(ctx, MigrateOptions{Slot: Slots, From: from, To: to}), "out of range")
		c.requireOwner(t, slot, from)
	})

	t.Run("KeySlot agrees with CLUSTER KEYSLOT", func(t *testing.T) {
		for _, k := range []string{"", "a", "{", "}", "{}", "{}{a}", "a{b}c{d}", "{a", "a}b{c}", "chaos:{q01}:job:x", "123456789", "é{ü}"} {
			v, err := Do(c.addrs[0], "CLUSTER", "KEYSLOT", k)
			require.NoError(t, err)
			require.Equal(t, v, int64(KeySlot(k)), "key %q", k)
		}
	})
}

// requireMarks checks that from marks slot migrating and to marks it
// importing.
func requireMarks(t *testing.T, from, to string, slot int) {
	t.Helper()
	for _, a := range []string{from, to} {
		nodes, err := ClusterNodes(a)
		require.NoError(t, err)
		for _, n := range nodes {
			if !n.Myself {
				continue
			}
			if a == from {
				require.NotEmpty(t, n.Migrating[slot], "%s marks slot %d migrating", a, slot)
			} else {
				require.NotEmpty(t, n.Importing[slot], "%s marks slot %d importing", a, slot)
			}
		}
	}
}
