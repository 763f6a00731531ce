package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
)

// Flow control under faults (the flow scenario): every job carries a
// flow key, the queue holds each key to a MaxInFlight, one key to a
// larger one of its own (an override), and the battery checks that no
// key ever has more jobs processing than its limit, in two ways:
//
//   - sampled, by the engine's own count: an observer reads every key
//     with work (FlowKeys: each key's processing jobs, the frun set) every
//     flowSampleEvery, from the start of the load to the end of the drain;
//   - exactly, by the handlers: from the ledger, each key's runs are
//     swept in time order, a run under way from its start to its end, or
//     to the SIGKILL of its worker, and at no run's start may more of the
//     key's runs be under way than its limit. A handler runs inside its
//     job's lease (it starts after the claim and records its end before
//     the complete), so this count is never above the engine's, unless a
//     lease lapsed under a running handler (a stalled worker, a heartbeat
//     held up): then the engine rightly stops counting it, and such a
//     start is counted as explained, as a duplicate run is.
//
// After the drain no key may be left with pending or processing jobs.

// FlowSetup is a scenario's flow control: Keys keys (0: none), each
// held to MaxInFlight jobs processing, the first (FlowKeyOf's busiest)
// to Override.
type FlowSetup struct {
	Keys        int `json:"keys"`
	MaxInFlight int `json:"max_in_flight"`
	Override    int `json:"override"`
}

// Bounds of the flow observer.
const (
	flowSampleEvery = 20 * time.Millisecond
	flowSampleRead  = 2 * time.Second // one sample's reads
	maxFlowSamples  = 100_000         // a run's samples, whatever its length
)

// FlowKeyOf is the flow key of the job of sequence number seq among n
// keys: one job in four is the first key's ("k00", the override's), the
// others go round the rest.
func FlowKeyOf(seq int64, n int) string {
	if n <= 1 || seq%4 == 0 {
		return "k00"
	}
	return fmt.Sprintf("k%02d", 1+seq%int64(n-1))
}

// limit is key's MaxInFlight.
func (f FlowSetup) limit(key string) int {
	if key == FlowKeyOf(0, f.Keys) && f.Override > 0 {
		return f.Override
	}
	return f.MaxInFlight
}

// setFlowLimits gives the flow scenario's queue its limits and override.
func (h *harness) setFlowLimits(ctx context.Context, admin redis.UniversalClient) error {
	c, err := queue.NewClient(queue.Config{Redis: admin, Namespace: Namespace, DisableEvents: true})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	f := h.sc.Flow
	for _, q := range h.queues {
		if _, err := c.SetFlowLimits(ctx, q, queue.FlowLimits{MaxInFlight: f.MaxInFlight}); err != nil {
			return fmt.Errorf("chaos: flow limits of %s: %w", q, err)
		}
		if f.Override > 0 {
			o := queue.FlowOverride{Key: FlowKeyOf(0, f.Keys), MaxInFlight: f.Override}
			if _, err := c.SetFlowOverride(ctx, q, o); err != nil {
				return fmt.Errorf("chaos: flow override of %s: %w", q, err)
			}
		}
	}
	h.logf("flow keys: %d a queue, max in flight %d, %s %d", f.Keys, f.MaxInFlight, FlowKeyOf(0, f.Keys), f.Override)
	return nil
}

// flowObserver samples every key's processing jobs while the run goes on.
type flowObserver struct {
	f        FlowSetup
	mu       sync.Mutex
	samples  int
	errors   int
	over     int
	peak     map[string]int
	examples []string
	left     int64 // keys with work after the drain; -1: not read
}

// observeFlow samples until ctx ends.
func (h *harness) observeFlow(ctx context.Context, admin redis.UniversalClient, o *flowObserver) {
	c, err := queue.NewClient(queue.Config{Redis: admin, Namespace: Namespace, DisableEvents: true})
	if err != nil {
		h.problem("flow observer: %v", err)
		return
	}
	defer func() { _ = c.Close() }()
	for i := 0; i < maxFlowSamples && sleep(ctx, flowSampleEvery); i++ {
		for _, q := range h.queues {
			o.sample(ctx, c, q)
		}
	}
}

// sample reads every key of q with work and notes the in-flight counts.
func (o *flowObserver) sample(ctx context.Context, c *queue.Client, q string) {
	rctx, cancel := context.WithTimeout(ctx, flowSampleRead)
	defer cancel()
	keys, _, err := c.FlowKeys(rctx, q, 0, queue.MaxFlowKeysPage)
	t := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			o.errors++ // a read during a slot's move or a node's restart: latency, not the checked promise
		}
		return
	}
	o.samples++
	for _, k := range keys {
		n := int(k.InFlight)
		o.peak[k.Key] = max(o.peak[k.Key], n)
		if lim := o.f.limit(k.Key); n > lim {
			o.over++
			if len(o.examples) < 5 {
				o.examples = append(o.examples, fmt.Sprintf("%s key %s: %d in flight at %s, limit %d", q, k.Key, n, stamp(t.UnixNano()), lim))
			}
		}
	}
}

// finish reads, after the drain, how many keys are left with work.
func (o *flowObserver) finish(ctx context.Context, admin redis.UniversalClient, queues []string) {
	o.left = -1
	c, err := queue.NewClient(queue.Config{Redis: admin, Namespace: Namespace, DisableEvents: true})
	if err != nil {
		return
	}
	defer func() { _ = c.Close() }()
	var left int64
	for _, q := range queues {
		_, n, err := c.FlowKeys(ctx, q, 0, 1)
		if err != nil {
			return
		}
		left += n
	}
	o.left = left
}

// report adds the observer's figures to r.
func (o *flowObserver) report(r *Report) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r.FlowSamples, r.FlowSampleErrors, r.FlowOverSampled, r.FlowPeak, r.FlowKeysLeft = o.samples, o.errors, o.over, maps.Clone(o.peak), o.left
	for _, e := range o.examples {
		r.example("flow_over_sampled", e)
	}
	if o.samples == 0 {
		r.AddFailure("the flow observer read no sample")
	}
	if o.over > 0 {
		r.AddFailure(fmt.Sprintf("%d samples saw a flow key over its max in flight", o.over))
	}
	if o.left != 0 {
		r.AddFailure(fmt.Sprintf("flow keys with work after the drain: %d (-1: unread)", o.left))
	}
}

// CheckFlow counts, from the ledger, the runs of each flow key: every run
// carries the key its job was enqueued with (FlowKeyOf), and at no run's
// start are more of its key's runs under way than the key's limit, but
// where one of them lost its lease (see the comment at the top). It adds
// its figures and failures to r. A pure function, as Check.
func CheckFlow(r *Report, rec *Records, f FlowSetup) {
	r.FlowLimit, r.FlowOverride, r.FlowRunPeak = f.MaxInFlight, f.Override, map[string]int{}
	lost := map[string]bool{} // tokens whose outcome the store refused: their lease lapsed under them
	for _, o := range rec.Outcomes {
		if o.Store == "lease_lost" {
			lost[o.Token] = true
		}
	}
	killed := map[int]int64{} // worker pid -> its SIGKILL
	for _, ft := range rec.Faults {
		if ft.Kind == FaultWorkerKill && ft.Pid != 0 {
			killed[ft.Pid] = ft.Start
		}
	}
	type span struct {
		start, end int64
		token, id  string
	}
	byKey := map[string][]span{}
	for _, x := range runsOf(rec.Execs) {
		for tok, run := range x {
			s := run.start
			if s.Ev != "start" {
				continue // an end without its start: the ledger's rules count it
			}
			key := s.Flow
			if s.Seq > 0 {
				// Counted under the key it was enqueued with, which the
				// engine must hold it to, whatever the run was told.
				key = FlowKeyOf(s.Seq, f.Keys)
				if s.Flow != key {
					r.FlowWrongKey++
					r.example("flow_wrong_key", fmt.Sprintf("%s (seq %d): run with flow key %q, enqueued with %q", s.ID, s.Seq, s.Flow, key))
				}
			}
			end, ok := int64(0), false
			if run.end != nil {
				end, ok = run.end.T, true
			} else if k, was := killed[s.Pid]; was {
				end, ok = k, true
			}
			if !ok {
				continue // a run that never ended and whose worker was not killed: the ledger's rules count it
			}
			byKey[key] = append(byKey[key], span{start: s.T, end: max(end, s.T), token: tok, id: s.ID})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		runs := byKey[key]
		lim := f.limit(key)
		// Ends before starts at the same instant: a run that ended as
		// another began did not overlap it.
		type event struct {
			t     int64
			start bool
			i     int
		}
		evs := make([]event, 0, 2*len(runs))
		for i, s := range runs {
			evs = append(evs, event{s.start, true, i}, event{s.end, false, i})
		}
		slices.SortFunc(evs, func(a, b event) int {
			if c := cmp.Compare(a.t, b.t); c != 0 {
				return c
			}
			if a.start != b.start {
				if a.start {
					return 1
				}
				return -1
			}
			return cmp.Compare(a.i, b.i)
		})
		active := map[int]bool{}
		for _, e := range evs {
			if !e.start {
				delete(active, e.i)
				continue
			}
			active[e.i] = true
			r.FlowRunPeak[key] = max(r.FlowRunPeak[key], len(active))
			if len(active) <= lim {
				continue
			}
			var ids []string
			explained := false
			for i := range active {
				ids = append(ids, runs[i].id)
				explained = explained || lost[runs[i].token]
			}
			slices.Sort(ids)
			if explained {
				r.FlowRunsOverExplained++
				continue
			}
			r.FlowRunsOver++
			r.example("flow_runs_over", fmt.Sprintf("key %s at %s: %d runs under way, limit %d: %s",
				key, stamp(runs[e.i].start), len(active), lim, strings.Join(ids, ",")))
		}
	}
	if r.FlowRunsOver > 0 {
		r.AddFailure(fmt.Sprintf("%d runs began while their flow key had its max in flight under way", r.FlowRunsOver))
	}
	if r.FlowWrongKey > 0 {
		r.AddFailure(fmt.Sprintf("%d runs of a job with another flow key than its enqueue's", r.FlowWrongKey))
	}
}
