package queue

import (
	"context"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is one change of a job, as the scripts publish it on the queue's
// events channel (see [Client.Subscribe]).
type Event struct {
	// Type is what happened: "enqueued", "promoted", "claimed",
	// "completed", "retried", "dead", "reclaimed", "released", "canceled",
	// "rescheduled" or "deleted"; or, with no change of status, "log"
	// (lines were appended to the job's log, or it was just marked
	// truncated by an append none of whose lines fit: read them with
	// Client.Logs), "progress" (a heartbeat carried progress: read it with
	// Get) or "artifact" (artifacts were attached while the job runs: read
	// them with Client.Artifacts or Get); for a workflow node's job also
	// "ready" (released by its workflow) and "rearmed" (waiting again, a
	// retry).
	Type  string
	Queue string
	ID    string
	Kind  string
	// Status is the job's status after the change.
	Status Status
	// Attempts is the job's attempts after the change.
	Attempts int
	// At is the time of the change, by the clock of the client that made it
	// (Unix ms).
	At time.Time
}

const (
	// eventBuffer is the capacity of the channel Subscribe answers (and of
	// go-redis's channel behind it).
	eventBuffer = 256
	// EventsRefresh is how often a cluster subscription to every queue
	// reads the list of queues again to follow new ones.
	EventsRefresh = 5 * time.Second
)

// Subscribe delivers the events of the given queues, or of every queue when
// none is given, until ctx ends; then the channel closes. It returns once
// Redis has confirmed the subscription, so every event published after it
// returns is delivered (pub/sub is at most once: events published while the
// connection is down are lost, and a consumer that falls a minute behind
// loses events).
//
// On one server it SUBSCRIBEs to the queues' channels, or PSUBSCRIBEs to
// "<ns>:{*}:events" for every queue. On Redis Cluster the scripts publish
// with SPUBLISH, so that an event stays on its queue's shard: Subscribe
// SSUBSCRIBEs to each queue's channel on its own node; with no queue given
// it follows the known queues (see [Client.Queues]), reading the list again
// every EventsRefresh by the client's clock, so the first events of a queue
// created after Subscribe may be missed.
//
// On one server the scripts that can touch many jobs (enqueue, claim,
// complete, promote, reclaim) publish only when the primary counts a
// subscriber of the queue's channel or any pattern subscription: a
// subscriber of its own on a replica, which the primary cannot count,
// misses those events. Subscribe subscribes on the client's server, the
// primary.
//
// Events are off when Config.DisableEvents is set: the channel then stays
// silent.
func (c *Client) Subscribe(ctx context.Context, queues ...string) (<-chan Event, error) {
	channels := make([]string, 0, len(queues))
	for _, q := range queues {
		k, err := c.keysFor(q)
		if err != nil {
			return nil, err
		}
		channels = append(channels, k.Events)
	}
	out := make(chan Event, eventBuffer)
	if !c.cluster {
		var ps *redis.PubSub
		if len(channels) == 0 {
			ps = c.rdb.PSubscribe(ctx, store.EventsPattern(c.ns))
		} else {
			ps = c.rdb.Subscribe(ctx, channels...)
		}
		early, err := confirm(ctx, ps, max(len(channels), 1))
		if err != nil {
			return nil, err
		}
		go func() {
			defer close(out)
			c.forward(ctx, ps, early, out)
		}()
		return out, nil
	}
	if len(queues) == 0 {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	sub := &clusterSub{c: c, out: out, subscribed: map[string]bool{}}
	if err := sub.add(ctx, queues); err != nil {
		cancel()
		sub.wg.Wait()
		return nil, err
	}
	if len(channels) == 0 {
		sub.wg.Go(func() { sub.follow(ctx) })
	}
	go func() {
		sub.wg.Wait()
		cancel()
		close(out)
	}()
	return out, nil
}

// confirm reads the confirmations of n subscriptions, keeping any message
// that arrives among them. It closes ps when it fails.
func confirm(ctx context.Context, ps *redis.PubSub, n int) ([]*redis.Message, error) {
	var early []*redis.Message
	for n > 0 {
		v, err := ps.Receive(ctx)
		if err != nil {
			_ = ps.Close()
			return nil, fmt.Errorf("queue: subscribe to events: %w", wrapRedis(err))
		}
		switch m := v.(type) {
		case *redis.Subscription:
			n--
		case *redis.Message:
			early = append(early, m)
		}
	}
	return early, nil
}

// forward turns the messages of ps into events until ctx ends, then closes
// ps.
func (c *Client) forward(ctx context.Context, ps *redis.PubSub, early []*redis.Message, out chan<- Event) {
	defer ps.Close()
	send := func(m *redis.Message) bool {
		q, ok := c.channelQueue(m.Channel)
		if !ok {
			return true
		}
		// A batch script publishes its events in one message, a line each.
		for line := range strings.SplitSeq(m.Payload, "\n") {
			ev, ok := parseEvent(q, line)
			if !ok {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	for _, m := range early {
		if !send(m) {
			return
		}
	}
	msgs := ps.Channel(redis.WithChannelSize(eventBuffer))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok || !send(m) {
				return
			}
		}
	}
}

// channelQueue is the queue of an events channel "<ns>:{<queue>}:events".
func (c *Client) channelQueue(channel string) (string, bool) {
	q, ok := strings.CutPrefix(channel, c.ns+":{")
	if !ok {
		return "", false
	}
	if q, ok = strings.CutSuffix(q, "}:events"); !ok || names.ValidateQueue(q) != nil {
		return "", false
	}
	return q, true
}

// parseEvent reads one event of queue as the scripts publish it, a line
// "type|id|kind|status|attempts|at_ms" (a message holds one or more lines).
func parseEvent(queue, payload string) (Event, bool) {
	f := strings.Split(payload, "|")
	if len(f) != 6 || f[0] == "" || f[1] == "" {
		return Event{}, false
	}
	attempts, err1 := strconv.Atoi(f[4])
	ms, err2 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil {
		return Event{}, false
	}
	return Event{Type: f[0], Queue: queue, ID: f[1], Kind: f[2], Status: Status(f[3]),
		Attempts: attempts, At: time.UnixMilli(ms).UTC()}, true
}

// clusterSub is a subscription on Redis Cluster: one sharded subscription
// per queue, each on the node of its queue's slot.
type clusterSub struct {
	c   *Client
	out chan Event
	wg  sync.WaitGroup

	mu         sync.Mutex
	subscribed map[string]bool
}

// add subscribes to the queues not subscribed yet.
func (s *clusterSub) add(ctx context.Context, queues []string) error {
	for _, q := range queues {
		s.mu.Lock()
		done := s.subscribed[q]
		s.mu.Unlock()
		if done {
			continue
		}
		k, err := s.c.keysFor(q)
		if err != nil {
			continue // not a queue chronoq would have created
		}
		ps := s.c.rdb.SSubscribe(ctx, k.Events)
		early, err := confirm(ctx, ps, 1)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.subscribed[q] = true
		s.mu.Unlock()
		s.wg.Go(func() { s.c.forward(ctx, ps, early, s.out) })
	}
	return nil
}

// follow subscribes to new queues every EventsRefresh until ctx ends.
func (s *clusterSub) follow(ctx context.Context) {
	for {
		t := s.c.clock.NewTimer(EventsRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
		// An error (Redis away) is tried again at the next refresh.
		if qs, err := s.c.Queues(ctx); err == nil {
			_ = s.add(ctx, qs)
		}
	}
}
