package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// ClaimOptions shape a claim.
type ClaimOptions struct {
	// Max is the most jobs to claim, 1 to MaxBatch. Defaults to 1.
	Max int
	// Wait is how long to wait for a job when none is pending, up to
	// MaxClaimWait; 0 answers at once. The wait is on the client's wake
	// hub for the queue and the claim's labels (wakehub.go): one reader a
	// hub, in XREADGROUP BLOCK of the queue's wake stream on the blocking
	// pool, to which every script that makes jobs pending while a claimer
	// waits adds an entry, hands each entry to the claim that has waited
	// longest. A job ends the wait at once; the time running out ends it
	// on the claim's own timer.
	Wait time.Duration
	// Visibility overrides the jobs' own lease length (100 ms to 24 h).
	Visibility time.Duration
	// Labels are the claimer's labels (at most MaxClaimLabels, each as
	// NewJob.Labels): the claim receives jobs without labels and jobs
	// whose labels are all among these, never another. Without labels it
	// receives only jobs without labels. Of the lists of pending jobs it
	// may take from (one per label set, see internal/store/layout.go), it takes first
	// from the one whose next job was enqueued first, each in its order.
	Labels []string

	// ahead: a worker's claim (ClaimNext) that also takes the jobs due
	// within this long, to start each at its due time (claim.lua). Not
	// for Claim's callers: a job claimed so must not start before then.
	ahead time.Duration
}

// MaxAhead is the longest a claim takes jobs ahead of their due time
// (plumbing.Client.ClaimNext): a job so held is processing for that long
// before it runs, so its cancel is a request to its worker.
const MaxAhead = 50 * time.Millisecond

// A queue's Limits cap every claim of it: a claim takes no more jobs than
// they allow, and one they hold back with jobs pending waits, within
// o.Wait, for the bucket's next token, or, at MaxInFlight, on the wake
// stream for a lease to end (the scripts that end one write to it).

// Claim takes up to o.Max pending jobs of queue, each under a fresh token
// and a lease of its visibility. It answers no job, and no error, when none
// came within o.Wait or the queue is paused. A claim first promotes the
// queue's scheduled jobs that are due, as many as o.Max, so a job due
// when the claim starts never waits for a promoter's pass. (A job that
// falls due during the wait is promoted by the promoter, whose promotion
// ends the wait.)
func (c *Client) Claim(ctx context.Context, queue string, o ClaimOptions) ([]*Job, error) {
	cl, err := c.claim(ctx, queue, o, false)
	return cl.jobs, err
}

// ClaimNext is Claim, and also answers a time to wake at: when the queue's
// earliest scheduled job is due, as the claim saw it before any wait. A
// worker that has run out of jobs can sleep until then and claim again:
// the claim promotes the job itself. Of the ClaimNext calls that see the
// same earliest due time, only the first is answered it, so that of many
// idle workers one wakes for each due time; the others get the zero time,
// as when nothing is scheduled or the queue is paused, and so does a call
// that took as many jobs as it asked for (it may have no room then). A
// promoter leaves a due time handed out to its claimer for 2 ms after it
// is due (see Promote). With ahead (at most MaxAhead), a claim that takes
// due jobs straight from the scheduled set (see claim.lua) also takes
// those due within ahead, each under a lease from its due time:
// starts[i], an instant of the client's clock, is when jobs[i] may start
// (zero: at once), by a lower bound of the queue's Redis clock
// (store.Floor), so it is never before the job is due by Redis's clock,
// however the two clocks stand.
func (in *inside) ClaimNext(ctx context.Context, queue string, o any, ahead time.Duration) (any, []time.Time, time.Time, error) {
	opts, ok := o.(ClaimOptions)
	if !ok {
		return nil, nil, time.Time{}, fmt.Errorf("%w: claim options are a queue.ClaimOptions, got %T", ErrInvalid, o)
	}
	if ahead < 0 || ahead > MaxAhead {
		return nil, nil, time.Time{}, invalid("ahead", "must be in [0, %s], got %s", MaxAhead, ahead)
	}
	opts.ahead = ahead
	cl, err := (*Client)(in).claim(ctx, queue, opts, true)
	return cl.jobs, cl.starts, cl.next, err
}

func (c *Client) claim(ctx context.Context, queue string, o ClaimOptions, wantNext bool) (claimed, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return claimed{}, err
	}
	if o, err = checkClaimOptions(o); err != nil {
		return claimed{}, err
	}
	deadline := time.Now().Add(o.Wait) // Redis waits in real time
	cl, err := c.claimNow(ctx, queue, k, o, wantNext, o.Wait)
	if err != nil || len(cl.jobs) > 0 || o.Wait == 0 {
		return cl, err
	}
	if cl.paused {
		// A paused queue hands out nothing: wait out the poll, then answer
		// empty-handed.
		c.sleepCtx(ctx, o.Wait)
		return claimed{}, nil
	}
	// The time to wake at is the one the first claim saw, before any wait;
	// the claims after a wait take nothing ahead.
	o.ahead = 0
	jobs, err := c.claimUntil(ctx, queue, k, o, cl, deadline)
	return claimed{jobs: jobs, next: cl.next}, err
}

// checkClaimOptions answers o with its defaults filled in and its labels
// canonical, or the error naming the option out of range.
func checkClaimOptions(o ClaimOptions) (ClaimOptions, error) {
	if o.Max == 0 {
		o.Max = 1
	}
	switch {
	case o.Max < 1 || o.Max > MaxBatch:
		return o, invalid("max", "must be in [1, %d], got %d", MaxBatch, o.Max)
	case o.Wait < 0 || o.Wait > MaxClaimWait:
		return o, invalid("wait", "must be in [0, %s], got %s", MaxClaimWait, o.Wait)
	case o.Visibility != 0 && (o.Visibility < MinVisibility || o.Visibility > MaxVisibility):
		return o, invalid("visibility", "must be in [%s, %s], got %s", MinVisibility, MaxVisibility, o.Visibility)
	}
	var err error
	if o.Labels, err = names.CanonicalLabels(o.Labels, MaxClaimLabels); err != nil {
		return o, &FieldError{Index: -1, Field: "labels", Err: err}
	}
	return o, nil
}

// sleepCtx waits d on the client's clock, or until ctx ends.
func (c *Client) sleepCtx(ctx context.Context, d time.Duration) {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}

// claimUntil waits, until deadline, for jobs that cl (a claim that found
// none) could not take, claiming again each time one may have become
// claimable. It answers no job, and no error, when the wait ends without
// one.
func (c *Client) claimUntil(ctx context.Context, queue string, k store.Keys, o ClaimOptions, cl claimed, deadline time.Time) ([]*Job, error) {
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return nil, nil //nolint:nilerr // a wait that ended (its time or ctx) answers empty-handed
		}
		var again bool
		var err error
		if cl.limited && !cl.limitAt.IsZero() {
			// Jobs are pending but the bucket holds them back: wait for
			// its next token, not on the wake stream. (At MaxInFlight the
			// wait is on the wake stream, below: an ended lease writes it.)
			c.sleepLimited(ctx, cl.limitAt, left)
			again = ctx.Err() == nil
		} else {
			again, err = c.awaitWake(ctx, "claim from", queue, k, o.Labels, cl.limited, left)
		}
		if err != nil || !again {
			return nil, err
		}
		left = max(time.Until(deadline), 0)
		cl, err = c.claimNow(ctx, queue, k, o, false, left)
		if err != nil || len(cl.jobs) > 0 || cl.paused {
			return cl.jobs, err
		}
	}
}

// awaitWake waits up to left on the wake hub for the queue and labels and
// answers whether to claim again. Woken, claim again (the wake hub also
// wakes a waiter when a read of its streams ends with no entry, see
// wakehub.go). Not woken, the wait is over: a job that became pending
// meanwhile woke another waiter. limited: the caller was held back at
// MaxInFlight, and the wait is for a lease to end. what names the
// caller's operation in an error ("claim from", "wait for").
func (c *Client) awaitWake(ctx context.Context, what, queue string, k store.Keys, labels []string, limited bool, left time.Duration) (bool, error) {
	t0 := time.Now()
	woken, err := c.waitWake(ctx, k, labels, left)
	if limited {
		c.limitWaited(time.Since(t0))
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errWaitEnded) {
			return false, nil //nolint:nilerr // the wait ended: not woken, and no error
		}
		return false, fmt.Errorf("queue: %s %s: %w", what, queue, err)
	}
	return woken, nil
}

// wakeChunk is the longest single read of a wake hub (wakehub.go): one of
// its waiters claims again at least this often, which also renews the
// mark that a claimer waits (a mark the scripts read before adding to the
// stream).
const wakeChunk = time.Second

// claimed is what claim.lua answered.
type claimed struct {
	jobs   []*Job
	paused bool
	// limited: the queue's limits held the claim back while jobs are
	// pending; claim again at limitAt (zero: when a lease ends).
	limited bool
	limitAt time.Time
	next    time.Time // the due time handed to this claim to wake at; zero: none
	// starts[i]: when jobs[i] may start, on the client's clock (zero: at
	// once); nil when every job may start at once
	starts []time.Time
}

func (c *Client) claimNow(ctx context.Context, queue string, k store.Keys, o ClaimOptions, wantNext bool, wait time.Duration) (claimed, error) {
	if t, on := tracing.Tracer(); on {
		start := time.Now()
		cl, err := c.claimOnce(ctx, queue, k, o, wantNext, wait)
		if len(cl.jobs) > 0 || err != nil {
			parents := make([]string, len(cl.jobs))
			for i, j := range cl.jobs {
				parents[i] = j.TraceParent
			}
			tracing.StartedAt(ctx, t, start, queue, "claim", tracing.OpReceive, trace.SpanKindClient, parents, err,
				tracing.AttrBatchCount.Int(len(cl.jobs)))
		}
		return cl, err
	}
	return c.claimOnce(ctx, queue, k, o, wantNext, wait)
}

// claimOnce is one claim.lua call: claimNow without its span.
func (c *Client) claimOnce(ctx context.Context, queue string, k store.Keys, o ClaimOptions, wantNext bool, wait time.Duration) (claimed, error) {
	t0 := c.clock.Now()
	token := newToken() // the same for every try of runSets: a rerun answers the same jobs
	p := store.ClaimArgs{Max: o.Max, TokenBase: token, VisibilityMs: o.Visibility.Milliseconds(), WantNext: wantNext,
		WaitMs: wait.Milliseconds(), AheadMs: o.ahead.Milliseconds()}
	res, err := callSets(ctx, c, store.Claim, k, &p, o.Labels, &p.Eligible)
	t1 := c.clock.Now()
	if err != nil {
		return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
	}
	var paused, limited bool
	var limitAt time.Time
	switch p := res.Paused.(type) {
	case int64:
		paused = p == 1
	case string: // "L<ms>": held back by the queue's limits
		limited, limitAt = true, c.parseLimitAt(strings.TrimPrefix(p, "L"))
	default:
		return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, &store.ReplyError{Script: "claim", Field: "paused", Reply: res.Paused, Want: "an integer or a string"})
	}
	next, err := nextOfReply(res.Next)
	if err != nil {
		return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
	}
	c.eng.Clock().Observe(res.NowUs, t0, t1)
	cl := claimed{jobs: make([]*Job, 0, len(res.Jobs)), paused: paused, limited: limited, limitAt: limitAt,
		next: c.localOf(next)}
	for i := range res.Jobs {
		packed, err := store.Str("claim", res.Jobs, i, "job")
		if err != nil {
			return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
		}
		j, err := parsePacked(queue, packed)
		if err != nil {
			return claimed{}, err
		}
		cl.jobs = append(cl.jobs, j)
	}
	if o.ahead > 0 || res.Starts != "" {
		if cl.starts, err = startsOf(res.Starts, len(cl.jobs), c.floorOf(queue), res.NowUs, t1); err != nil {
			return claimed{}, fmt.Errorf("queue: claim from %s: %w", queue, err)
		}
	}
	return cl, nil
}

// floorOf answers the bound of queue's Redis clock that its claims ahead
// keep (one a queue: a cluster's nodes keep clocks of their own).
func (c *Client) floorOf(queue string) *store.Floor {
	if f, ok := c.floors.Load(queue); ok {
		return f.(*store.Floor)
	}
	f, _ := c.floors.LoadOrStore(queue, &store.Floor{})
	return f.(*store.Floor)
}

// startsOf reads claim.lua's starts for n jobs: "" (nil: all at once) or
// Redis's µs as the script ended and the µs each job must wait after
// nowUs. It answers each as the instant of the client's clock at which
// Redis's clock has reached it, by the bound f, which it first gives the
// claim's own readings (seen at t1: the later one bounds closer).
func startsOf(reply any, n int, f *store.Floor, nowUs int64, t1 time.Time) ([]time.Time, error) {
	s, ok := reply.(string)
	if !ok {
		return nil, &store.ReplyError{Script: "claim", Field: "starts", Reply: reply, Want: "a string"}
	}
	f.Observe(nowUs, t1)
	if s == "" {
		return nil, nil
	}
	end, list, ok := strings.Cut(s, " ")
	endUs, err := strconv.ParseInt(end, 10, 64)
	if !ok || err != nil || endUs < nowUs {
		return nil, &store.ReplyError{Script: "claim", Field: "starts", Reply: reply, Want: "Redis's µs at the end, a space, waits"}
	}
	f.Observe(endUs, t1)
	waits := strings.Split(list, ",")
	if len(waits) != n {
		return nil, &store.ReplyError{Script: "claim", Field: "starts", Reply: reply, Want: fmt.Sprintf("%d waits", n)}
	}
	out := make([]time.Time, n)
	for i, w := range waits {
		us, err := strconv.ParseInt(w, 10, 64)
		if err != nil || us < 0 {
			return nil, &store.ReplyError{Script: "claim", Field: "starts", Reply: reply, Want: "waits in µs"}
		}
		if us > 0 {
			out[i] = f.Reaches(nowUs + us)
		}
	}
	return out, nil
}

// errWaitEnded is a wait on the wake stream that Redis ended because the
// node stopped being a master (a failover, or REPLICAOF: "UNBLOCKED ...").
// The wait answers empty at once; the caller's next call reaches the new
// master through its client's own redirection.
var errWaitEnded = errors.New("queue: the wait's server stopped being a master")
