package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClaimOptions shape a claim.
type ClaimOptions struct {
	// Max is the most jobs to claim, 1 to MaxBatch. Defaults to 1.
	Max int
	// Wait is how long to wait for a job when none is pending, up to
	// MaxClaimWait; 0 answers at once. The wait is a BLMOVE on the
	// blocking pool. A job ends it at once; the time running out ends it
	// on Redis's next timer tick, up to 1/hz s later (100 ms at the
	// default hz of 10: Redis 7.0 answers a BLMOVE with a 5 ms timeout
	// after about 100 ms).
	Wait time.Duration
	// Visibility overrides the jobs' own lease length (100 ms to 24 h).
	Visibility time.Duration
}

// Claim takes up to o.Max pending jobs of queue, each under a fresh token
// and a lease of its visibility. It answers no job, and no error, when none
// came within o.Wait or the queue is paused. A claim first promotes the
// queue's scheduled jobs that are due, as many as o.Max, so a job due
// when the claim starts never waits for a promoter's pass. (A job that
// falls due during the wait is promoted by the promoter, whose push ends
// the wait.)
func (c *Client) Claim(ctx context.Context, queue string, o ClaimOptions) ([]*Job, error) {
	jobs, _, err := c.claim(ctx, queue, o, false)
	return jobs, err
}

// ClaimNext is Claim, and also answers a time to wake at: when the queue's
// earliest scheduled job is due, as the claim saw it before any wait. A
// worker that has run out of jobs can sleep until then and claim again:
// the claim promotes the job itself. Of the ClaimNext calls that see the
// same earliest due time, only the first is answered it, so that of many
// idle workers one wakes for each due time; the others get the zero time,
// as when nothing is scheduled or the queue is paused.
func (c *Client) ClaimNext(ctx context.Context, queue string, o ClaimOptions) ([]*Job, time.Time, error) {
	return c.claim(ctx, queue, o, true)
}

func (c *Client) claim(ctx context.Context, queue string, o ClaimOptions, wantNext bool) ([]*Job, time.Time, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, time.Time{}, err
	}
	if o.Max == 0 {
		o.Max = 1
	}
	switch {
	case o.Max < 1 || o.Max > MaxBatch:
		return nil, time.Time{}, invalid("max", "must be in [1, %d], got %d", MaxBatch, o.Max)
	case o.Wait < 0 || o.Wait > MaxClaimWait:
		return nil, time.Time{}, invalid("wait", "must be in [0, %s], got %s", MaxClaimWait, o.Wait)
	case o.Visibility != 0 && (o.Visibility < MinVisibility || o.Visibility > MaxVisibility):
		return nil, time.Time{}, invalid("visibility", "must be in [%s, %s], got %s", MinVisibility, MaxVisibility, o.Visibility)
	}
	cl, err := c.claimNow(ctx, queue, k, o, wantNext)
	if err != nil || len(cl.jobs) > 0 || o.Wait == 0 {
		return cl.jobs, cl.next, err
	}
	if cl.paused {
		// A paused queue hands out nothing: wait out the poll, then answer
		// empty-handed.
		t := c.clock.NewTimer(o.Wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.Chan():
		}
		return nil, time.Time{}, nil
	}
	jobs, err := c.claimBlocking(ctx, queue, k, o)
	return jobs, cl.next, err
}

// claimed is what claim.lua answered.
type claimed struct {
	jobs   []*Job
	paused bool
	next   time.Time // the due time handed to this claim to wake at; zero: none
}

func (c *Client) claimNow(ctx context.Context, queue string, k keys, o ClaimOptions, wantNext bool) (claimed, error) {
	now := c.clock.Now()
	v, err := c.run(ctx, claimScript, k, now.UnixMilli(),
		[]string{k.pending, k.processing, k.leases, k.paused, k.scheduled, k.stats},
		o.Max, newToken(), o.Visibility.Milliseconds(), cutoffOf(now), boolArg(wantNext))
	if err != nil {
		return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
	}
	res, _ := v.([]any)
	if len(res) < 2 {
		return claimed{}, fmt.Errorf("queue: claim from %s: unexpected reply %v", queue, v)
	}
	paused, _ := res[0].(int64)
	next, err := nextOfReply(res[1])
	if err != nil {
		return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
	}
	cl := claimed{jobs: make([]*Job, 0, len(res)-2), paused: paused == 1, next: next}
	for _, r := range res[2:] {
		packed, _ := r.(string)
		j, err := claimedJob(queue, unpackFields(packed))
		if err != nil {
			return claimed{}, err
		}
		cl.jobs = append(cl.jobs, j)
	}
	return cl, nil
}

// unpackFields reads a hash packed by a script as NUL-joined fields and
// values; a field that appears twice keeps its last value (claim.lua
// appends the fields it wrote after the hash as it read it).
func unpackFields(s string) map[string]string {
	parts := strings.Split(s, "\x00")
	m := make(map[string]string, len(parts)/2)
	for i := 0; i+1 < len(parts); i += 2 {
		m[parts[i]] = parts[i+1]
	}
	return m
}

func claimedJob(queue string, h map[string]string) (*Job, error) {
	j, err := jobFromHash(queue, h["id"], h)
	if err != nil {
		return nil, err
	}
	j.Token = h[fToken]
	return j, nil
}

// blmove moves the right end of src to the dest end of dst, waiting up to
// wait for src to have an element, on the blocking pool. It sends BLMOVE
// itself: go-redis's BLMove rounds the timeout to whole seconds. A wait
// that ends empty answers redis.Nil, and so does one that Redis aborted:
// when a master is demoted to a replica (a cluster or Sentinel failover, or
// REPLICAOF) the clients parked in BLMOVE are answered "UNBLOCKED force
// unblock from blocking operation, instance state changed". Nothing moved,
// so the caller's next call reaches the new master through its client's
// own redirection.
func (c *Client) blmove(ctx context.Context, src, dst, dest string, wait time.Duration) (string, error) {
	v, err := c.blocking.Do(ctx, "BLMOVE", src, dst, "RIGHT", dest,
		strconv.FormatFloat(wait.Seconds(), 'f', 3, 64)).Text()
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "UNBLOCKED") {
		return "", redis.Nil
	}
	return v, err
}

// claimBlocking waits in BLMOVE for one job, then activates it. If the
// process dies between the two, the id waits in processing with no lease
// until a reclaim sweep finds it.
func (c *Client) claimBlocking(ctx context.Context, queue string, k keys, o ClaimOptions) ([]*Job, error) {
	id, err := c.blmove(ctx, k.pending, k.processing, "LEFT", o.Wait)
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("queue: claim from %s: %w", queue, wrapRedis(err))
	}
	// The id is ours now: finish the claim even when ctx has ended, and hand
	// the job straight back if the caller is gone.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimMarkerTimeout)
	defer cancel()
	token := newToken()
	v, err := c.run(actx, activateScript, k, c.nowMs(), []string{k.pending, k.processing, k.leases, k.paused},
		id, token, o.Visibility.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("queue: claim from %s: activating %s: %w", queue, id, err)
	}
	if v == nil {
		return nil, nil // a reclaim sweep took it back first, or the queue was paused
	}
	h := flatToMap(v)
	h["id"] = id
	j, err := claimedJob(queue, h)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		if err := c.Release(actx, queue, j.ID, j.Token); err != nil {
			return nil, fmt.Errorf("queue: claim from %s: handing back %s: %w", queue, id, err)
		}
		return nil, nil
	}
	jobs := []*Job{j}
	if o.Max > 1 {
		more, err := c.claimNow(ctx, queue, k, ClaimOptions{Max: o.Max - 1, Visibility: o.Visibility}, false)
		if err == nil {
			jobs = append(jobs, more.jobs...)
		}
	}
	return jobs, nil
}
