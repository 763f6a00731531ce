package queue

import (
	"context"
	"errors"
	"github.com/chronoq/chronoq/internal/store"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The wake hub: a client's waiting claims (and WaitPending calls) do not
// each hold a connection of the blocking pool. The waiters of one queue
// and one set of labels share one hub, whose one goroutine reads the wake
// streams they wait on (XREADGROUP BLOCK through the streams' group, as a
// single waiter did) and hands each entry it reads to the waiter that has
// waited longest in the hub. So a process holds one blocked connection per
// queue and label set that has waiters, however many wait, and an entry
// still wakes one waiter of all the processes that wait on the stream
// (the group gives it to one reader).
//
// No wake-up is lost in the process:
//   - a waiter that leaves (its wait ran out, its context ended) after
//     the hub handed it an entry hands the entry to the next waiter, or,
//     when none is left, writes it back to its stream for other readers;
//   - an entry the hub reads when no waiter is left is written back too;
//   - a read that ends with no entry (every wakeChunk) wakes the longest
//     waiter anyway, which claims again: that renews the mark that a
//     claimer waits (which the scripts read before they write to the
//     stream) and takes a job whose entry went elsewhere, so a job that
//     became pending reaches a waiter within wakeChunk at worst;
//   - a read that fails hands the error to every waiter (each answers it,
//     as it would have answered its own read's), and a read Redis ended
//     (the node stopped being a master, a slot moving) ends every wait,
//     each waiter claiming again at once.

// wakeHubs are a client's hubs, by queue and canonical labels. A hub is
// in the map while its reader runs, which is while it has waiters.
type wakeHubs struct {
	mu sync.Mutex
	m  map[string]*wakeHub
}

// wakeHub is the hub of one queue and label set.
type wakeHub struct {
	c      *Client
	k      store.Keys
	labels []string
	id     string // its key in wakeHubs

	mu      sync.Mutex
	waiters []*waiter // longest waiting first
}

// waiter is one wait in a hub. The hub hands it one wake, on ch, and
// removes it from its list as it does; a waiter that leaves takes itself
// off the list unless it was handed one.
type waiter struct {
	ch chan wake
}

// wake is what a hub hands a waiter: from an entry of stream (then it
// stands for jobs that became claimable, and must not be dropped), or,
// with stream "", the end of a read with no entry, or err.
type wake struct {
	stream string
	err    error
}

// maxWakeRead is the most entries one read of a hub takes per stream.
// Each wake stream holds one entry at most (its MAXLEN), so one read
// answers at most one per stream: the COUNT only bounds a future change.
const maxWakeRead = 64

// waitWake waits up to d for an entry of the queue's wake stream no
// waiter has read, or of the wake stream of a label set whose labels are
// all among labels (canonical; see layout.go), through the hub of k's
// queue and labels. It answers woken when the hub woke it (for an entry,
// or for a read that ended with no entry: the caller claims again
// either way), not when the time ran out or ctx ended; errWaitEnded when
// Redis ended the hub's read, and the read's error when it failed.
//
// A job of a label set wakes only the claimers waiting on its set's
// stream, who can take it: a claimer without its labels is never woken
// for it, so none is woken for a job it cannot take, and none takes a
// wake-up from the claimer that can. A lease that ends under a
// MaxInFlight limit writes the streams of the lists that hold jobs (the
// queue's own, each set's), so it wakes a claimer that can use the room.
func (c *Client) waitWake(ctx context.Context, k store.Keys, labels []string, d time.Duration) (woken bool, err error) {
	h, w := c.joinHub(k, labels)
	t := time.NewTimer(max(d, time.Millisecond)) // Redis's streams wake in real time
	defer t.Stop()
	select {
	case wk := <-w.ch:
		if ctx.Err() != nil {
			h.passOn(wk) // the caller will not claim: the next waiter does
			return false, nil
		}
		return wk.err == nil, wk.err
	case <-ctx.Done():
	case <-t.C:
	}
	h.leave(w)
	return false, nil
}

// Waiters counts the claims (and WaitPending calls) of the client that
// wait in its wake hubs now, all queues together.
func (in *inside) Waiters() int {
	c := (*Client)(in)
	c.hubs.mu.Lock()
	defer c.hubs.mu.Unlock()
	n := 0
	for _, h := range c.hubs.m {
		h.mu.Lock()
		n += len(h.waiters)
		h.mu.Unlock()
	}
	return n
}

// joinHub adds a waiter to the hub of k's queue and labels, making the
// hub and starting its reader when it has none.
func (c *Client) joinHub(k store.Keys, labels []string) (*wakeHub, *waiter) {
	id := k.Name + "\x00" + strings.Join(labels, ",")
	w := &waiter{ch: make(chan wake, 1)}
	c.hubs.mu.Lock()
	defer c.hubs.mu.Unlock()
	if c.hubs.m == nil {
		c.hubs.m = map[string]*wakeHub{}
	}
	h := c.hubs.m[id]
	start := h == nil
	if start {
		h = &wakeHub{c: c, k: k, labels: labels, id: id}
		c.hubs.m[id] = h
	}
	h.mu.Lock()
	h.waiters = append(h.waiters, w)
	h.mu.Unlock()
	if start {
		go h.read()
	}
	return h, w
}

// leave takes w off the hub's list; when the hub had handed it a wake
// already, it passes that on.
func (h *wakeHub) leave(w *waiter) {
	h.mu.Lock()
	if i := slices.Index(h.waiters, w); i >= 0 {
		h.waiters = slices.Delete(h.waiters, i, i+1)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.passOn(<-w.ch) // handed one: it is in ch (handed under h.mu)
}

// passOn hands wk, which its waiter will not use, to the longest waiter;
// with none left, an entry's wake goes back to its stream, for the
// waiters of other hubs and processes.
func (h *wakeHub) passOn(wk wake) {
	if wk.stream == "" || h.hand(wk) {
		return
	}
	h.giveBack(wk.stream)
}

// hand gives wk to the longest waiter, and reports whether there was one.
func (h *wakeHub) hand(wk wake) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waiters) == 0 {
		return false
	}
	w := h.waiters[0]
	h.waiters = slices.Delete(h.waiters, 0, 1)
	w.ch <- wk // buffered, and handed once: never blocks
	return true
}

// handAll gives wk to every waiter.
func (h *wakeHub) handAll(wk wake) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiters {
		w.ch <- wk
	}
	h.waiters = nil
}

// giveBack writes an entry to stream again, which a wake no waiter of
// this hub could use stood for (best effort: a waiter's own claim every
// wakeChunk covers a failure).
func (h *wakeHub) giveBack(stream string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, MaxLen: 1, Values: []any{"n", 1}}).Err()
}

// more reports whether the hub has waiters; when not, it leaves the
// client's hubs (under both locks, so a waiter joins either this reader
// or a new hub's).
func (h *wakeHub) more() bool {
	h.c.hubs.mu.Lock()
	defer h.c.hubs.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waiters) > 0 {
		return true
	}
	delete(h.c.hubs.m, h.id)
	return false
}

// streams are the wake streams the hub reads: the queue's own, and those
// of the label sets whose labels are all among the hub's, as the client
// last read the queue's sets.
func (h *wakeHub) streams() []string {
	streams := []string{h.k.Wake}
	if len(h.labels) > 0 {
		if v, ok := h.c.labelSets.Load(h.k.Name); ok {
			streams = append(streams, v.(*setView).eligibleFor(h.labels).wakes...)
		}
	}
	return streams
}

// read is the hub's reader: it reads the wake streams while the hub has
// waiters, each read at most the client's wakeChunk.
func (h *wakeHub) read() {
	for h.more() {
		select {
		case <-h.c.closing:
			h.handAll(wake{err: errClosed})
			continue
		default:
		}
		h.readOnce()
	}
}

// errClosed is the wait of a client that was closed.
var errClosed = errors.New("queue: the client is closed")

// readOnce reads the hub's streams once and hands out what it read.
func (h *wakeHub) readOnce() {
	c := h.c
	streams := h.streams()
	args := make([]string, 0, 2*len(streams))
	args = append(args, streams...)
	for range streams {
		args = append(args, ">")
	}
	// Through the streams' group (see wakeGroup): an entry written since
	// the last read of any reader is this read's, at once if it came
	// before.
	ctx := context.Background() // the read is bounded by its BLOCK and the pool's read timeout
	res, err := c.blocking.XReadGroup(ctx, &redis.XReadGroupArgs{Group: store.WakeGroup, Consumer: store.WakeGroup,
		Streams: args, Count: maxWakeRead, Block: max(c.wakeChunk, time.Millisecond), NoAck: true}).Result()
	var rerr redis.Error
	switch {
	case err == nil:
		for _, s := range res {
			for range s.Messages {
				if !h.hand(wake{stream: s.Stream}) {
					h.giveBack(s.Stream)
				}
			}
		}
	case errors.Is(err, redis.Nil):
		h.hand(wake{}) // the longest waiter claims again (see the file's comment)
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOGROUP"):
		h.noGroup(ctx, len(streams) > 1)
	default:
		h.failed(err)
	}
}

// failed hands out a read's error: a read Redis ended ends every wait, a
// slot that moves makes every waiter claim again (through its client's
// redirection), and any other error is every waiter's.
func (h *wakeHub) failed(err error) {
	var rerr redis.Error
	switch {
	case migrating(err):
		h.handAll(wake{})
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "UNBLOCKED"):
		h.handAll(wake{err: errWaitEnded})
	default:
		h.handAll(wake{err: wrapRedis(err)})
	}
}

// noGroup handles a read that found a stream without its group: a queue
// made before wake streams had their group gets it, and every waiter
// claims again; with no queue at all, the hub waits for the stream the
// queue's creation writes, and then every waiter claims again.
func (h *wakeHub) noGroup(ctx context.Context, sets bool) {
	c := h.c
	err := c.rdb.XGroupCreate(ctx, h.k.Wake, store.WakeGroup, "$").Err()
	if err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP") {
		if sets {
			c.labelSets.Delete(h.k.Name) // its sets as the claim reads them again
		}
		h.handAll(wake{})
		return
	}
	err = c.blocking.XRead(ctx, &redis.XReadArgs{Streams: []string{h.k.Wake, "$"}, Count: 1,
		Block: max(c.wakeChunk, time.Millisecond)}).Err()
	switch {
	case err == nil:
		h.handAll(wake{})
	case errors.Is(err, redis.Nil):
		h.hand(wake{})
	default:
		h.failed(err)
	}
}
