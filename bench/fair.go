package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/chronoq/chronoq/queue"
)

// ---- 7: fairness between flow keys ----

// Scenario 7: one key ("hot") with -fair-hot jobs enqueued first, then
// -fair-keys cold keys with fairPerKey jobs each, enqueued while the 50
// handlers drain the hot backlog. For every cold key, the wait of its
// first job to start (handler start − the start of the enqueue call that
// sent it) and the number of jobs started in between. Three runs of the
// same jobs: chronoq with flow keys (NewJob.FlowKey: claims take the keys
// with work in turns), chronoq without (FIFO: the cold keys wait behind
// the backlog), and asynq, which has no keys (its Group option aggregates
// a group's tasks into one task, it does not share the workers out; a
// queue per key with weighted priorities is the nearest, not practical
// at a thousand keys), on one plain queue.

const (
	fairPerKey    = 5   // jobs of each cold key
	fairProducers = 8   // enqueuers of the hot backlog and of the cold jobs
	fairChunk     = 100 // jobs a chronoq EnqueueBatch, or asynq Enqueue calls in a row
	fairHotKey    = "hot"
	maxFairKeys   = 100_000 // the largest -fair-keys
)

// fairRun is one side's result: per cold key, its first job's wait and
// the jobs started between its enqueue and its start.
type fairRun struct {
	keys        int
	waits       delays
	before      []int64 // per cold key whose first job started, sorted
	bound       int64   // the largest of the cold keys' bounds: keys with work at its enqueue + jobs in flight
	over        int     // cold keys with more jobs started before their first than their bound
	allStarted  time.Duration
	hotLeft     int // hot jobs not yet started when the last cold job started
	incomplete  bool
	coldStarted int
}

// fairProbe records what the handlers see: a global start count, and for
// each cold job its first start (time and count) and its enqueue (time,
// and the start count read just before its enqueue call began).
type fairProbe struct {
	keys, cold int
	started    atomic.Int64 // every job's starts, hot and cold
	coldDone   *sampler     // closes done when every cold job has started
	startAt    []atomic.Int64
	startSeq   []atomic.Int64
	sentAt     []atomic.Int64
	sentSeq    []atomic.Int64
	coldSent   atomic.Int64 // cold jobs whose enqueue call has begun
	keysSent   []atomic.Int64
	lastColdAt atomic.Int64
}

func newFairProbe(keys int) *fairProbe {
	n := keys * fairPerKey
	return &fairProbe{keys: keys, cold: n, coldDone: newSampler(n), startAt: make([]atomic.Int64, n),
		startSeq: make([]atomic.Int64, n), sentAt: make([]atomic.Int64, n), sentSeq: make([]atomic.Int64, n),
		keysSent: make([]atomic.Int64, n)}
}

// handler counts every start, and records each cold job's first.
func (p *fairProbe) handler(b []byte) time.Duration {
	seq := p.started.Add(1)
	i := parsePayload(b).I
	if i < 0 || i >= p.cold {
		return 0 // a hot job
	}
	now := time.Now()
	if p.startSeq[i].CompareAndSwap(0, seq) {
		p.startAt[i].Store(now.UnixNano())
		p.lastColdAt.Store(now.UnixNano())
	}
	p.coldDone.record(i, 0)
	return 0
}

// sending wraps the cold jobs' send: before each call it notes, for the
// jobs it sends, the time and the starts so far, and after it the keys
// that may have had work when the jobs arrived: the hot one, and every
// cold key of a call begun by then (a call begun later, by another
// producer, that finished first is counted; one begun after this one
// returned enqueued its keys after these).
func (p *fairProbe) sending(send sendFunc) sendFunc {
	return func(ctx context.Context, from, to int) error {
		now, seq := time.Now().UnixNano(), p.started.Load()
		for i := from; i < to; i++ {
			p.sentAt[i].Store(now)
			p.sentSeq[i].Store(seq)
		}
		p.coldSent.Add(int64(to - from))
		err := send(ctx, from, to)
		keys := 1 + (p.coldSent.Load()+fairPerKey-1)/fairPerKey
		for i := from; i < to; i++ {
			p.keysSent[i].Store(keys)
		}
		return err
	}
}

// result sums the probe up: per cold key, its first job to start.
func (p *fairProbe) result(incomplete bool, hot int, consumerStart time.Time) fairRun {
	res := fairRun{keys: p.keys, incomplete: incomplete}
	waits := make([]time.Duration, 0, p.keys)
	for k := range p.keys {
		first := -1
		for j := k * fairPerKey; j < (k+1)*fairPerKey; j++ {
			if s := p.startSeq[j].Load(); s != 0 && (first < 0 || s < p.startSeq[first].Load()) {
				first = j
			}
		}
		if first < 0 {
			continue
		}
		waits = append(waits, time.Duration(p.startAt[first].Load()-p.sentAt[first].Load()))
		before := p.startSeq[first].Load() - p.sentSeq[first].Load() - 1
		bound := p.keysSent[first].Load() + concurrency
		res.before = append(res.before, before)
		res.bound = max(res.bound, bound)
		if before > bound {
			res.over++
		}
	}
	slices.Sort(res.before)
	res.waits = newDelays(p.keys, waits, incomplete)
	res.coldStarted = int(p.coldDone.n.Load())
	if last := p.lastColdAt.Load(); last != 0 {
		res.allStarted = time.Unix(0, last).Sub(consumerStart)
	}
	res.hotLeft = max(hot-(int(p.started.Load())-res.coldStarted), 0)
	return res
}

// fairJobs are the jobs of scenario 7 on one side: mkHot the i-th hot
// job, mkCold the i-th cold one (key i / fairPerKey).
type fairJobs struct {
	hot, cold  sendFunc
	start      func(ctx context.Context, h handler) (stop func(), err error)
	name       string
	hotN, keys int
}

func (b *bench) fair(ctx context.Context, t *table) {
	flowRun := b.chronoqFair(ctx, true)
	fifo := b.chronoqFair(ctx, false)
	a := b.asynqFair(ctx)
	t.add(fmt.Sprintf("7. fairness: %s cold keys × %d jobs behind a key of %s", thousands(float64(b.fairKeys)), fairPerKey,
		thousands(float64(b.fairHot))), "", "", "")
	t.add("   chronoq with flow keys: cold key's first job wait, p50", t.fairDur(flowRun, 0.50), t.fairDur(a, 0.50), fairRatio(flowRun, a, 0.50))
	t.add("   p99", t.fairDur(flowRun, 0.99), t.fairDur(a, 0.99), fairRatio(flowRun, a, 0.99))
	t.add("   worst", t.fairDur(flowRun, 1), t.fairDur(a, 1), fairRatio(flowRun, a, 1))
	t.add("   jobs started before it, p99 / worst", t.fairBefore(flowRun), t.fairBefore(a), "")
	t.add("   bound: keys with work at its enqueue + 50 in flight; keys over it", t.fairBound(flowRun), t.fairBound(a), "")
	t.add("   every cold job started, after", t.fairAll(flowRun), t.fairAll(a), "")
	t.add("   chronoq without keys (FIFO): first job wait, p50", t.fairDur(fifo, 0.50), t.fairDur(a, 0.50), fairRatio(fifo, a, 0.50))
	t.add("   p99", t.fairDur(fifo, 0.99), t.fairDur(a, 0.99), fairRatio(fifo, a, 0.99))
	t.add("   worst", t.fairDur(fifo, 1), t.fairDur(a, 1), fairRatio(fifo, a, 1))
	t.add("   jobs started before it, p99 / worst", t.fairBefore(fifo), t.fairBefore(a), "")
	t.add("   bound; keys over it", t.fairBound(fifo), t.fairBound(a), "")
	t.add("   every cold job started, after", t.fairAll(fifo), t.fairAll(a), "")
}

// chronoqFair runs scenario 7 on chronoq, the jobs with flow keys or not.
func (b *bench) chronoqFair(ctx context.Context, keyed bool) fairRun {
	name := map[bool]string{true: "chronoq flow keys", false: "chronoq no keys"}[keyed]
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("%s: %v", name, err)
		return fairRun{incomplete: true}
	}
	defer s.close()
	key := func(k string) string {
		if keyed {
			return k
		}
		return ""
	}
	mk := func(payload []byte, flowKey string) queue.NewJob {
		j := chronoqJob(payload, time.Time{})
		j.FlowKey = key(flowKey)
		return j
	}
	return b.fairRun(ctx, fairJobs{name: name, hotN: b.fairHot, keys: b.fairKeys,
		hot: s.send(false, func(int) queue.NewJob { return mk(noopPayload, fairHotKey) }),
		cold: s.send(false, func(i int) queue.NewJob {
			return mk(indexPayload(i, time.Time{}), fmt.Sprintf("cold%06d", i/fairPerKey))
		}),
		start: func(ctx context.Context, h handler) (func(), error) {
			return s.consume(ctx, b.runtime, b.fairHot+b.fairKeys*fairPerKey, h, func(int) {})
		},
	})
}

// asynqFair runs scenario 7 on asynq: one plain queue, an asynq.Server of
// 50 handlers.
func (b *bench) asynqFair(ctx context.Context) fairRun {
	s := openAsynq(b.addr)
	defer s.close()
	return b.fairRun(ctx, fairJobs{name: "asynq", hotN: b.fairHot, keys: b.fairKeys,
		hot: s.send(func(int) (*asynq.Task, []asynq.Option) { return asynq.NewTask(asynqType, noopPayload), nil }),
		cold: s.send(func(i int) (*asynq.Task, []asynq.Option) {
			return asynq.NewTask(asynqType, indexPayload(i, time.Time{})), nil
		}),
		start: func(_ context.Context, h handler) (func(), error) { return s.serve(serverConfig{}, h) },
	})
}

// fairRun enqueues the hot backlog (untimed), starts the consumer, sends
// the cold jobs, and waits until each cold job has started or the
// deadline passes.
func (b *bench) fairRun(ctx context.Context, j fairJobs) fairRun {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	p := newFairProbe(j.keys)
	if !b.reset() {
		return p.result(true, j.hotN, time.Now())
	}
	if n, err := produce(ctx, fairProducers, j.hotN, fairChunk, j.hot); err != nil {
		logf("%s: hot backlog: %d of %d: %v", j.name, n, j.hotN, err)
		return p.result(true, j.hotN, time.Now())
	}
	start := time.Now()
	stop, err := j.start(ctx, p.handler)
	if err != nil {
		logf("%s: %v", j.name, err)
		return p.result(true, j.hotN, start)
	}
	defer stop()
	incomplete := false
	if n, err := produce(ctx, fairProducers, p.cold, fairChunk, p.sending(j.cold)); err != nil {
		logf("%s: cold jobs: %d of %d: %v", j.name, n, p.cold, err)
		incomplete = true
	}
	select {
	case <-p.coldDone.done:
	case <-ctx.Done():
		incomplete = true
	}
	res := p.result(incomplete, j.hotN, start)
	logf("%s: %d of %d cold jobs started, the last %s after the consumer started; %d hot jobs not yet started then",
		j.name, res.coldStarted, p.cold, res.allStarted.Round(time.Millisecond), res.hotLeft)
	return res
}

// ---- cells ----

func (t *table) fairDur(r fairRun, q float64) string {
	v, ok := r.waits.pct(q)
	return t.durCell(r.waits, v, ok)
}

func (t *table) fairBefore(r fairRun) string {
	if len(r.before) == 0 {
		return t.star("none ran", true)
	}
	p99 := r.before[min(max(int(math.Ceil(0.99*float64(len(r.before))))-1, 0), len(r.before)-1)]
	return t.star(fmt.Sprintf("%s / %s", thousands(float64(p99)), thousands(float64(r.before[len(r.before)-1]))), r.incomplete)
}

func (t *table) fairBound(r fairRun) string {
	return t.star(fmt.Sprintf("≤ %s; %s of %s", thousands(float64(r.bound)), thousands(float64(r.over)),
		thousands(float64(len(r.before)))), r.incomplete)
}

func (t *table) fairAll(r fairRun) string {
	s := dur(r.allStarted)
	if r.hotLeft > 0 {
		s += fmt.Sprintf(" (%s hot left)", thousands(float64(r.hotLeft)))
	}
	return t.star(s, r.incomplete || r.coldStarted < r.keys*fairPerKey)
}

// fairRatio is asynq's wait over chronoq's at percentile q.
func fairRatio(c, a fairRun, q float64) string {
	cv, cok := c.waits.pct(q)
	av, aok := a.waits.pct(q)
	if !cok || !aok {
		return "n/a"
	}
	return lowerBetter(float64(cv), float64(av))
}
