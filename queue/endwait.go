package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/batch"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
)

// The end hub: the waits for a job's end (WaitEnded) do not each hold a
// subscription. They share the events the scripts already publish on each
// queue's events channel (see Subscribe): a client holds one pub/sub
// connection on one server, SUBSCRIBEd to the channels of the queues that
// have waiters (on a cluster, one sharded subscription per such queue, on
// its node), and one goroutine per connection reads it and wakes the
// waiters of each job whose event says it ended (completed, dead,
// canceled) or was deleted. A woken waiter reads the job, once.
//
// Nothing is lost:
//   - a waiter joins the hub (and its queue's subscription is confirmed)
//     before it first reads the job, so an end either comes before that
//     read, which sees it, or is published after the subscription;
//   - pub/sub is at most once: when go-redis reconnects a subscription it
//     subscribes again, and each confirmation wakes every waiter of the
//     queue, who reads its job again (an end published while the
//     connection was down is then read from the store);
//   - a wait that runs out reads the job once more, and answers it as it is.
//
// A queue's channel stays subscribed for endLinger after its last waiter
// left, so that a client waiting for one job after another does not
// subscribe for each; then it is unsubscribed (while it is, the scripts
// that can skip building events for an unheard queue build them).

// endLinger is how long a queue's channel stays subscribed without waiters.
const endLinger = 30 * time.Second

// endHub is a client's waits for job ends.
type endHub struct {
	mu     sync.Mutex
	c      *Client
	ps     *redis.PubSub        // one server: the one subscription; nil when none
	queues map[string]*endQueue // by queue name
	chans  map[string]*endQueue // by events channel
	count  int                  // waiters, all queues together
	closed bool                 // by Client.Close: no more subscriptions
}

// endQueue is the hub's subscription to one queue's events and its
// waiters.
type endQueue struct {
	channel string
	ps      *redis.PubSub // a cluster: the queue's own sharded subscription
	// ready is closed when Redis confirmed the subscription.
	ready    chan struct{}
	hasReady bool
	live     bool                               // a cluster: Redis confirmed ps's subscription
	waiters  map[string]map[*endWaiter]struct{} // by job id
	n        int
	linger   clockwork.Timer // runs while the queue has no waiter
}

// endWaiter is one wait: ch (buffered, one slot) tells it to read its job
// again.
type endWaiter struct {
	ch chan struct{}
}

func (w *endWaiter) poke() {
	select {
	case w.ch <- struct{}{}:
	default: // poked already: one read covers both
	}
}

// maxEndReads is the most jobs one read of waiting jobs takes (a job's
// payload and result may each be a MiB: a read of many must stay small).
const maxEndReads = 100

// newEndReads answers the batcher of the reads of waiting jobs, by queue:
// the waits that read their jobs at once (10,000 joining, or woken by one
// batch's ends, or by a subscription made again) read them in pipelines
// of up to maxEndReads jobs, not each on a connection of the pool.
func (c *Client) newEndReads() *batch.Batcher[string, *Job] {
	return batch.New(c.sendEndReads, batch.Config[string]{Items: func(string) int { return batch.MaxItems / maxEndReads }})
}

// sendEndReads reads jobs ids of queue q in one pipeline, as Get does.
func (c *Client) sendEndReads(ctx context.Context, q string, ids []string) ([]*Job, []error, error) {
	k, err := c.keysFor(q)
	if err != nil {
		return nil, nil, err
	}
	pipe := c.rdb.Pipeline()
	reads := make([]func() (*Job, error), len(ids))
	for i, id := range ids {
		reads[i] = getJob(ctx, pipe, k, q, id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, wrapRedis(err)
	}
	jobs, errs := make([]*Job, len(ids)), make([]error, len(ids))
	for i, read := range reads {
		jobs[i], errs[i] = read()
	}
	return jobs, errs, nil
}

// errEventsOff is the wait of a client whose scripts publish no events.
var errEventsOff = errors.New("queue: waiting for a job's end needs job events, which Config.DisableEvents turns off")

// ended reports whether a job of status st will change no more by itself.
func ended(st Status) bool {
	return st == StatusCompleted || st == StatusDead || st == StatusCanceled
}

// WaitEnded waits up to wait for the job to end, and answers it as it is
// then: once it has ended (completed, with its result; dead; canceled),
// at once; otherwise, when wait runs out (by the client's clock), as it is
// at that moment, with no error: its Status tells which. A job that fails
// with attempts left has not ended (it is retried): the wait goes on, and
// so does it for a workflow node's job that is waiting for its parents, or
// a push job being delivered. A job deleted during the wait answers
// ErrNotFound, as an unknown one does; ctx ending answers ctx's error.
//
// wait 0 reads the job once; a negative wait is a *FieldError. The wait
// has no cap of its own (the HTTP API caps its ?wait): a waiting call
// holds no Redis connection. Its waits share the client's one
// subscription to the events of the queues waited on (see Subscribe), and
// a job's end reaches its waiters through it, not by reading Redis over
// and over. It needs events: with Config.DisableEvents it answers an error.
func (c *Client) WaitEnded(ctx context.Context, queue, id string, wait time.Duration) (*Job, error) {
	if _, err := c.keysFor(queue); err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	if wait < 0 {
		return nil, invalid("wait", "must not be negative, got %s", wait)
	}
	if wait == 0 {
		return c.Get(ctx, queue, id)
	}
	if c.pubcmd == "" {
		return nil, errEventsOff
	}
	t := c.clock.NewTimer(wait)
	defer t.Stop()
	q, w := c.ends.join(c, queue, id)
	if q == nil {
		return nil, errClosed
	}
	defer c.ends.leave(queue, id, q, w)
	read := func() (*Job, error) { return c.endReads.Do(ctx, queue, id) }
	select {
	case <-q.ready:
	case <-t.Chan():
		return read() // the subscription was not confirmed in time
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closing:
		return nil, errClosed
	}
	for {
		j, err := read()
		if err != nil || ended(j.Status) {
			return j, err
		}
		select {
		case <-w.ch:
		case <-t.Chan():
			return read()
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closing:
			return nil, errClosed
		}
	}
}

// JobWaiters counts the WaitEnded calls of the client that wait now, all
// queues together.
func (in *inside) JobWaiters() int {
	c := (*Client)(in)
	c.ends.mu.Lock()
	defer c.ends.mu.Unlock()
	return c.ends.count
}

// join adds a waiter for the job, subscribing to its queue's events when
// the hub is not subscribed to them; nil when the client is closed.
func (h *endHub) join(c *Client, queue, id string) (*endQueue, *endWaiter) {
	w := &endWaiter{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil
	}
	if h.queues == nil {
		h.c, h.queues, h.chans = c, map[string]*endQueue{}, map[string]*endQueue{}
	}
	q := h.queues[queue]
	if q == nil {
		q = &endQueue{channel: store.QueueKeys(c.ns, queue).Events, ready: make(chan struct{}), waiters: map[string]map[*endWaiter]struct{}{}}
		h.queues[queue], h.chans[q.channel] = q, q
		h.subscribe(q)
	}
	if q.linger != nil {
		q.linger.Stop()
		q.linger = nil
	}
	ws := q.waiters[id]
	if ws == nil {
		ws = map[*endWaiter]struct{}{}
		q.waiters[id] = ws
	}
	ws[w] = struct{}{}
	q.n++
	h.count++
	return q, w
}

// subscribe subscribes to q's channel (under h.mu). go-redis sends the
// command now or, when it cannot, with its next connection: the
// confirmation, read by the reader, closes q.ready.
func (h *endHub) subscribe(q *endQueue) {
	ctx, c := context.Background(), h.c
	if c.cluster {
		h.shard(q)
		return
	}
	if h.ps == nil {
		h.ps = c.rdb.Subscribe(ctx, q.channel)
		go h.read(h.ps)
		return
	}
	_ = h.ps.Subscribe(ctx, q.channel) // a failure: the reconnection subscribes again
}

// leave takes the waiter off; the queue's subscription lingers for
// endLinger once it has no waiter.
func (h *endHub) leave(queue, id string, q *endQueue, w *endWaiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := q.waiters[id]
	delete(ws, w)
	if len(ws) == 0 {
		delete(q.waiters, id)
	}
	q.n--
	h.count--
	if q.n > 0 || h.closed {
		return
	}
	var lt clockwork.Timer
	lt = h.c.clock.AfterFunc(endLinger, func() { h.drop(queue, q, lt) })
	q.linger = lt
}

// drop unsubscribes from q's channel when it still has no waiter and the
// timer lt that calls it is still its linger.
func (h *endHub) drop(queue string, q *endQueue, lt clockwork.Timer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.n > 0 || q.linger != lt || h.queues[queue] != q {
		return
	}
	delete(h.queues, queue)
	delete(h.chans, q.channel)
	if q.ps != nil {
		_ = q.ps.Close()
		return
	}
	if len(h.queues) == 0 {
		_ = h.ps.Close()
		h.ps = nil
		return
	}
	_ = h.ps.Unsubscribe(context.Background(), q.channel)
}

// close ends the hub's subscriptions (Client.Close).
func (h *endHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.ps != nil {
		_ = h.ps.Close()
		h.ps = nil
	}
	for name, q := range h.queues {
		if q.ps != nil {
			_ = q.ps.Close()
		}
		if q.linger != nil {
			q.linger.Stop()
		}
		delete(h.queues, name)
		delete(h.chans, q.channel)
	}
}

// read is the reader of one subscription, until it is closed.
func (h *endHub) read(ps *redis.PubSub) {
	for m := range ps.ChannelWithSubscriptions(redis.WithChannelSize(eventBuffer)) {
		switch m := m.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(m.Channel, ps)
			case "sunsubscribe":
				h.moved(m.Channel, ps)
			}
		case *redis.Message:
			h.message(m.Channel, m.Payload)
		}
	}
}

// confirmed handles a subscription Redis confirmed on ps: the first opens
// the queue's waits; a later one (go-redis subscribed again on a new
// connection, or the hub on a slot's new master) makes every waiter read
// its job again.
func (h *endHub) confirmed(channel string, ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.chans[channel]
	if q == nil || (q.ps != nil && q.ps != ps) {
		return // dropped, or a sharded subscription since replaced
	}
	q.live = true
	if !q.hasReady {
		q.hasReady = true
		close(q.ready)
		return
	}
	for _, ws := range q.waiters {
		for w := range ws {
			w.poke()
		}
	}
}

// shard subscribes to q's channel on a cluster (under h.mu): a sharded
// subscription of its own, on the node of the channel's slot as the
// cluster client knows it, and a goroutine that subscribes again until
// Redis confirms one (a client whose slot map is behind sends it to a node
// that answers MOVED, and go-redis does not follow that for a
// subscription).
func (h *endHub) shard(q *endQueue) {
	q.live = false
	q.ps = h.c.rdb.SSubscribe(context.Background(), q.channel)
	go h.read(q.ps)
	go h.confirm(q, q.ps)
}

// confirm waits for Redis to confirm ps, q's sharded subscription, and
// while it has not, has the cluster client read its slot map again and
// subscribes anew, each time after a longer pause (from 10 ms to 1 s, in
// real time: the slot map reloads in real time). It stops when q is
// dropped, the client closed, or another subscription replaced ps.
func (h *endHub) confirm(q *endQueue, ps *redis.PubSub) {
	cc, _ := h.c.rdb.(*redis.ClusterClient)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-h.c.closing:
			t.Stop()
			return
		}
		h.mu.Lock()
		if h.closed || h.chans[q.channel] != q || q.ps != ps || q.live {
			h.mu.Unlock()
			return
		}
		if cc != nil {
			cc.ReloadState(context.Background())
		}
		_ = ps.Close()
		ps = h.c.rdb.SSubscribe(context.Background(), q.channel)
		q.ps = ps
		go h.read(ps)
		h.mu.Unlock()
	}
}

// moved handles a sharded subscription Redis ended by itself (the slot
// of the channel moved to another node): when the hub still wants the
// channel, it subscribes again, on the slot's new node.
func (h *endHub) moved(channel string, ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.chans[channel]
	if q == nil || q.ps != ps || h.closed {
		return // dropped by the hub, or already subscribed again
	}
	_ = ps.Close()
	if cc, ok := h.c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
	h.shard(q)
}

// message wakes the waiters of each job the message's events say ended or
// was deleted.
func (h *endHub) message(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.chans[channel]
	if q == nil || len(q.waiters) == 0 {
		return
	}
	for line := range strings.SplitSeq(payload, "\n") {
		typ, rest, _ := strings.Cut(line, "|")
		id, rest, _ := strings.Cut(rest, "|")
		ws := q.waiters[id]
		if len(ws) == 0 {
			continue
		}
		_, rest, _ = strings.Cut(rest, "|") // the kind
		st, _, _ := strings.Cut(rest, "|")
		if typ != "deleted" && !ended(Status(st)) {
			continue // retried, claimed, a log line...: not an end
		}
		for w := range ws {
			w.poke()
		}
	}
}
