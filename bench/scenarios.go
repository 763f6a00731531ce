package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/chronoq/chronoq/queue"
)

// handler is a scenario's job body, the same on both sides: it gets the
// payload and answers 0 to succeed, or d > 0 to fail the attempt asking
// for a retry d later.
type handler func(payload []byte) time.Duration

func noop([]byte) time.Duration { return 0 }

// sendFunc enqueues the jobs [from, to) of a scenario.
type sendFunc func(ctx context.Context, from, to int) error

// produce runs producers goroutines that together send jobs [0, total) in
// chunks, and answers how many were sent and the first error.
func produce(ctx context.Context, producers, total, chunk int, send sendFunc) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, sent atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range total/chunk + 1 {
				from := int(next.Add(int64(chunk))) - chunk
				if from >= total || ctx.Err() != nil {
					return
				}
				to := min(from+chunk, total)
				if err := send(ctx, from, to); err != nil {
					cancel(err)
					return
				}
				sent.Add(int64(to - from))
			}
		})
	}
	wg.Wait()
	n := int(sent.Load())
	if n < total {
		if err := context.Cause(ctx); err != nil && err != context.Canceled {
			return n, err
		}
		return n, errStopped
	}
	return n, nil
}

// Payloads: the same bytes on both sides.
var noopPayload = []byte("{}")

type payload struct {
	I  int   `json:"i"`
	At int64 `json:"at,omitempty"` // requested run time, Unix ns
}

func indexPayload(i int, at time.Time) []byte {
	if at.IsZero() {
		return fmt.Appendf(nil, `{"i":%d}`, i)
	}
	return fmt.Appendf(nil, `{"i":%d,"at":%d}`, i, at.UnixNano())
}

func parsePayload(b []byte) payload {
	p := payload{I: -1}
	_ = json.Unmarshal(b, &p)
	return p
}

// reset empties Redis before a measurement.
func (b *bench) reset() bool {
	if err := flushAll(b.ctl); err != nil {
		logf("FLUSHALL: %v", err)
		return false
	}
	return true
}

func (b *bench) cpu() time.Duration {
	d, err := redisCPU(b.ctl)
	if err != nil {
		logf("INFO cpu: %v", err)
	}
	return d
}

// ---- 1 and 2: end-to-end and drain ----

// flow is how one pass of scenario 1 or 2 runs.
type flow struct {
	drain  bool // enqueue everything first, untimed (scenario 2)
	single bool // chronoq: one Enqueue call a job, as asynq (else EnqueueBatch of 100)
	split  bool // log every command, to split Redis's time by phase (see phases.go)
}

func (f flow) name() string {
	switch {
	case f.drain:
		return "drain"
	case f.single:
		return "e2e single"
	}
	return "e2e batch"
}

// e2e runs scenario 1 twice over: one Enqueue call a job on both sides
// (the fair row: what a producer sending one job at a time, every HTTP
// client, sees), then with chronoq's EnqueueBatch of 100 against the same
// asynq figure; and, in a pass of its own, splits the Redis time of the
// one-a-call flow by phase.
func (b *bench) e2e(ctx context.Context, t *table) {
	cs, _ := b.chronoqFlow(ctx, flow{single: true})
	a, _ := b.asynqFlow(ctx, flow{single: true})
	t.add("1. end-to-end no-op jobs/s, one Enqueue a job", t.rate(cs), t.rate(a), higherBetter(cs.perSec(), a.perSec()))
	t.add("   redis CPU µs/job", t.cpuCell(cs), t.cpuCell(a), lowerBetter(cs.cpuPerJob(), a.cpuPerJob()))
	t.add("   client CPU µs/job", t.clientCell(cs), t.clientCell(a), lowerBetter(cs.clientPerJob(), a.clientPerJob()))
	cx, pc := b.chronoqFlow(ctx, flow{single: true, split: true})
	ax, pa := b.asynqFlow(ctx, flow{single: true, split: true})
	for ph := range nPhases {
		t.add("   of which "+phaseNames[ph], t.phaseCell(cs, pc, ph), t.phaseCell(a, pa, ph),
			lowerBetter(pc.perJob(cs, ph), pa.perJob(a, ph)))
	}
	t.add("   calls a job: enqueue+claim+complete+other", t.callsCell(cx, pc), t.callsCell(ax, pa),
		lowerBetter(pc.totalCallsPerJob(cx.done), pa.totalCallsPerJob(ax.done)))
	cb, _ := b.chronoqFlow(ctx, flow{})
	t.add("1. end-to-end, chronoq EnqueueBatch of 100", t.rate(cb), t.rate(a), higherBetter(cb.perSec(), a.perSec())+" vs a single")
	t.add("   redis CPU µs/job", t.cpuCell(cb), t.cpuCell(a), lowerBetter(cb.cpuPerJob(), a.cpuPerJob())+" vs a single")
	t.add("   client CPU µs/job", t.clientCell(cb), t.clientCell(a), lowerBetter(cb.clientPerJob(), a.clientPerJob())+" vs a single")
}

func (b *bench) drain(ctx context.Context, t *table) {
	c, _ := b.chronoqFlow(ctx, flow{drain: true})
	a, _ := b.asynqFlow(ctx, flow{drain: true})
	t.add("2. drain jobs/s (pre-filled)", t.rate(c), t.rate(a), higherBetter(c.perSec(), a.perSec()))
	t.add("   redis CPU µs/job", t.cpuCell(c), t.cpuCell(a), lowerBetter(c.cpuPerJob(), a.cpuPerJob()))
	t.add("   client CPU µs/job", t.clientCell(c), t.clientCell(a), lowerBetter(c.clientPerJob(), a.clientPerJob()))
}

// splitOn starts logging every command for a split pass.
func (b *bench) splitOn(f flow) bool {
	if !f.split {
		return true
	}
	if err := slowlogOn(b.ctl, b.slowlogMax()); err != nil {
		logf("SLOWLOG: %v", err)
		return false
	}
	return true
}

// slowlogMax bounds the slow log of a split pass: the top-level commands
// and those the scripts call (logged too, then left out), with room.
func (b *bench) slowlogMax() int { return 60*b.n + 100_000 }

// splitOff ends a split pass of Redis CPU cpu and sums what it logged.
func (b *bench) splitOff(f flow, cpu time.Duration, classify func([]string) phase) phases {
	if !f.split {
		return phases{}
	}
	logs, whole, err := slowlogOff(b.ctl, b.slowlogMax())
	if err != nil {
		logf("SLOWLOG: %v", err)
		return phases{}
	}
	if !whole {
		logf("SLOWLOG: the log filled up: no split")
		return phases{}
	}
	return split(logs, b.ctlAddr, cpu, classify)
}

// chronoqFlow measures N no-op jobs through chronoq: enqueued by 4
// producers (one Enqueue a job, or batches of 100) while the consumer runs
// (e2e), or enqueued first, untimed, by 8 producers (drain). The clock
// stops when Redis has acknowledged the last completion.
func (b *bench) chronoqFlow(ctx context.Context, f flow) (throughput, phases) {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	res := throughput{want: b.n, incomplete: true}
	if !b.reset() {
		return res, phases{}
	}
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return res, phases{}
	}
	defer s.close()
	send := s.send(f.single, func(int) queue.NewJob { return chronoqJob(noopPayload, time.Time{}) })
	if f.drain {
		if n, err := produce(ctx, fillProducers, b.n, enqueueBatch, send); err != nil {
			logf("chronoq: fill: %d of %d: %v", n, b.n, err)
			return res, phases{}
		}
	}
	if !b.splitOn(f) {
		return res, phases{}
	}
	cnt := newCounter(b.n)
	endProfile := b.prof.start("chronoq", f)
	defer endProfile() // on an early return; ended below after a measurement
	cpu0, self0 := b.cpu(), selfCPU()
	start := time.Now()
	stop, err := s.consume(ctx, b.runtime, b.n, noop, cnt.add)
	if err != nil {
		logf("chronoq: %v", err)
		return res, phases{}
	}
	defer stop()
	if !f.drain {
		start = time.Now()
		if n, err := produce(ctx, e2eProducers, b.n, enqueueBatch, send); err != nil {
			logf("chronoq: enqueue: %d of %d: %v", n, b.n, err)
		}
	}
	end := time.Now()
	select {
	case <-cnt.done:
		end, res.incomplete = cnt.end, false
	case <-ctx.Done():
		end = time.Now()
	}
	res.cpu, res.client = b.cpu()-cpu0, selfCPU()-self0
	endProfile()
	res.elapsed = end.Sub(start)
	res.done = min(int(cnt.n.Load()), b.n)
	ph := b.splitOff(f, res.cpu, chronoqPhase())
	logf("chronoq %s%s: %d jobs in %s", f.name(), map[bool]string{true: " (split pass)"}[f.split], res.done, res.elapsed.Round(time.Millisecond))
	return res, ph
}

// asynqFlow is chronoqFlow on asynq: single Enqueue calls (asynq has no
// batch), an asynq.Server with Concurrency 50. The clock stops when asynq's
// processed counter, written after each handler returns, reaches N.
func (b *bench) asynqFlow(ctx context.Context, f flow) (throughput, phases) {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	res := throughput{want: b.n, incomplete: true}
	if !b.reset() {
		return res, phases{}
	}
	s := openAsynq(b.addr)
	defer s.close()
	send := s.send(func(int) (*asynq.Task, []asynq.Option) { return asynq.NewTask(asynqType, noopPayload), nil })
	if f.drain {
		if n, err := produce(ctx, fillProducers, b.n, enqueueBatch, send); err != nil {
			logf("asynq: fill: %d of %d: %v", n, b.n, err)
			return res, phases{}
		}
	}
	if !b.splitOn(f) {
		return res, phases{}
	}
	cnt := newCounter(b.n)
	endProfile := b.prof.start("asynq", f)
	defer endProfile() // on an early return; ended below after a measurement
	cpu0, self0 := b.cpu(), selfCPU()
	start := time.Now()
	stop, err := s.serve(serverConfig{}, func([]byte) time.Duration { cnt.add(1); return 0 })
	if err != nil {
		logf("asynq: %v", err)
		return res, phases{}
	}
	defer stop()
	if !f.drain {
		start = time.Now()
		if n, err := produce(ctx, e2eProducers, b.n, enqueueBatch, send); err != nil {
			logf("asynq: enqueue: %d of %d: %v", n, b.n, err)
		}
	}
	end := time.Now()
	select {
	case <-cnt.done:
		var ok bool
		end, ok = waitProcessed(ctx, b.ctl, b.n)
		res.incomplete = !ok
	case <-ctx.Done():
		end = time.Now()
	}
	res.cpu, res.client = b.cpu()-cpu0, selfCPU()-self0
	endProfile()
	res.elapsed = end.Sub(start)
	res.done = min(processed(b.ctl), b.n)
	ph := b.splitOff(f, res.cpu, asynqPhase)
	logf("asynq %s%s: %d jobs in %s", f.name(), map[bool]string{true: " (split pass)"}[f.split], res.done, res.elapsed.Round(time.Millisecond))
	return res, ph
}

// ---- 3: enqueue ----

func (b *bench) enqueue(ctx context.Context, t *table) {
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return
	}
	defer s.close()
	a := openAsynq(b.addr)
	defer a.close()
	mkC := func(int) queue.NewJob { return chronoqJob(noopPayload, time.Time{}) }
	cs := b.enqueueRun(ctx, "chronoq single", s.send(true, mkC))
	cb := b.enqueueRun(ctx, "chronoq batch", s.send(false, mkC))
	as := b.enqueueRun(ctx, "asynq single", a.send(func(int) (*asynq.Task, []asynq.Option) {
		return asynq.NewTask(asynqType, noopPayload), nil
	}))
	t.add("3. enqueue/s, single", t.rate(cs), t.rate(as), higherBetter(cs.perSec(), as.perSec()))
	t.add("   redis CPU µs/job", t.cpuCell(cs), t.cpuCell(as), lowerBetter(cs.cpuPerJob(), as.cpuPerJob()))
	t.add("3. enqueue/s, batch of 100", t.rate(cb), "n/a (no batch API)",
		higherBetter(cb.perSec(), as.perSec())+" vs a single")
	t.add("   redis CPU µs/job", t.cpuCell(cb), "n/a", lowerBetter(cb.cpuPerJob(), as.cpuPerJob())+" vs a single")
}

// enqueueRun times N jobs sent by 8 producers, 100 jobs a chunk (each
// chunk one batch, or 100 single calls, as send does).
func (b *bench) enqueueRun(ctx context.Context, name string, send sendFunc) throughput {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	res := throughput{want: b.n, incomplete: true}
	if !b.reset() {
		return res
	}
	cpu0 := b.cpu()
	endProfile := b.prof.named(name + " enqueue")
	start := time.Now()
	n, err := produce(ctx, fillProducers, b.n, enqueueBatch, send)
	res.elapsed = time.Since(start)
	endProfile()
	res.cpu = b.cpu() - cpu0
	res.done, res.incomplete = n, err != nil
	if err != nil {
		logf("%s: %v", name, err)
	}
	logf("%s enqueue: %d jobs in %s", name, n, res.elapsed.Round(time.Millisecond))
	return res
}

// ---- 4: scheduled-job lateness ----

func (b *bench) late(ctx context.Context, t *table) {
	c := b.chronoqLate(ctx)
	ad := b.asynqLate(ctx, 0)
	at := b.asynqLate(ctx, tunedCheck)
	for _, v := range []struct {
		label string
		a     delays
	}{{"asynq default (5 s check)", ad}, {"asynq 100 ms check", at}} {
		t.add("4. lateness, vs "+v.label, "", "", "")
		b.delayRows(t, c, v.a)
	}
	b.lateProcRows(ctx, t)
}

func (b *bench) delayRows(t *table, c, a delays) {
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}, {"max", 1}} {
		cv, cok := c.pct(p.q)
		av, aok := a.pct(p.q)
		ratio := "n/a"
		if cok && aok {
			ratio = lowerBetter(float64(cv), float64(av))
		}
		t.add("   "+p.name, t.durCell(c, cv, cok), t.durCell(a, av, aok), ratio)
	}
	t.add("   early (of jobs run; earliest)", t.earlyCell(c), t.earlyCell(a), "")
}

// lateJobs are the due times of scenario 4, in the (shuffled, the same on
// both sides) order they are enqueued: evenly over lateSpread, the first
// lateLead after base.
func (b *bench) lateJobs(base time.Time) []time.Time {
	due := make([]time.Time, b.lateN)
	for i := range due {
		due[i] = base.Add(lateLead + lateSpread*time.Duration(i)/time.Duration(b.lateN))
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	return due
}

// lateHandler records, once per job, how late its handler started.
func lateHandler(smp *sampler) handler {
	return func(b []byte) time.Duration {
		now := time.Now()
		p := parsePayload(b)
		smp.record(p.I, now.Sub(time.Unix(0, p.At)))
		return 0
	}
}

func (b *bench) chronoqLate(ctx context.Context) delays {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	smp := newSampler(b.lateN)
	if !b.reset() {
		return smp.collect(true)
	}
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	defer s.close()
	stopP, err := promote(ctx, b.addr, b.promoterSkew)
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	defer stopP()
	stop, err := s.consume(ctx, b.runtime, b.lateN, lateHandler(smp), func(int) {})
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	incomplete := b.scheduleLate(ctx, "chronoq", smp, func(due []time.Time) sendFunc {
		return s.send(false, func(i int) queue.NewJob { return chronoqJob(indexPayload(i, due[i]), due[i]) })
	})
	stop()
	return smp.collect(incomplete)
}

func (b *bench) asynqLate(ctx context.Context, check time.Duration) delays {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	smp := newSampler(b.lateN)
	if !b.reset() {
		return smp.collect(true)
	}
	s := openAsynq(b.addr)
	defer s.close()
	stop, err := s.serve(serverConfig{delayedCheck: check}, lateHandler(smp))
	if err != nil {
		logf("asynq: %v", err)
		return smp.collect(true)
	}
	incomplete := b.scheduleLate(ctx, fmt.Sprintf("asynq (check %s)", orDefault(check)), smp, func(due []time.Time) sendFunc {
		return s.send(func(i int) (*asynq.Task, []asynq.Option) {
			return asynq.NewTask(asynqType, indexPayload(i, due[i])), []asynq.Option{asynq.ProcessAt(due[i])}
		})
	})
	stop()
	return smp.collect(incomplete)
}

// scheduleLate enqueues the jobs of scenario 4 with 4 producers and waits
// until every one has run or ctx ends; it answers whether it was cut short.
func (b *bench) scheduleLate(ctx context.Context, name string, smp *sampler, sender func(due []time.Time) sendFunc) bool {
	base := time.Now()
	due := b.lateJobs(base)
	n, err := produce(ctx, lateProducers, b.lateN, enqueueBatch, sender(due))
	if err != nil {
		logf("%s: enqueue: %d of %d: %v", name, n, b.lateN, err)
	}
	if took := time.Since(base); took >= lateLead {
		logf("%s: WARNING: the enqueues took %s, past the first due time: lateness includes them", name, took.Round(time.Millisecond))
	}
	select {
	case <-smp.done:
		logf("%s: %d scheduled jobs ran, the last %s after base+2s", name, b.lateN, time.Since(base.Add(lateLead+lateSpread)).Round(time.Millisecond))
		return false
	case <-ctx.Done():
		logf("%s: %d of %d scheduled jobs ran by the deadline", name, smp.n.Load(), b.lateN)
		return true
	}
}

func orDefault(d time.Duration) string {
	if d == 0 {
		return "default"
	}
	return d.String()
}

// ---- 5: retry-delay precision ----

func (b *bench) retry(ctx context.Context, t *table) {
	c := b.chronoqRetry(ctx)
	ad := b.asynqRetry(ctx, 0)
	at := b.asynqRetry(ctx, tunedCheck)
	for _, v := range []struct {
		label string
		a     delays
	}{{"asynq default (5 s check)", ad}, {"asynq 100 ms check", at}} {
		t.add("5. retry after 100 ms, vs "+v.label, "", "", "")
		b.delayRows(t, c, v.a)
	}
}

// retryHandler fails each job's first run asking for a retry 100 ms later,
// and records how far from that the second run started.
func retryHandler(smp *sampler, failedAt []atomic.Int64) handler {
	return func(b []byte) time.Duration {
		now := time.Now()
		p := parsePayload(b)
		if p.I < 0 || p.I >= len(failedAt) {
			return 0
		}
		if failedAt[p.I].CompareAndSwap(0, now.UnixNano()) {
			return retryDelay
		}
		asked := time.Unix(0, failedAt[p.I].Load()).Add(retryDelay)
		smp.record(p.I, now.Sub(asked))
		return 0
	}
}

func (b *bench) chronoqRetry(ctx context.Context) delays {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	smp := newSampler(b.retryN)
	if !b.reset() {
		return smp.collect(true)
	}
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	defer s.close()
	stopP, err := promote(ctx, b.addr, b.promoterSkew)
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	defer stopP()
	stop, err := s.consume(ctx, b.runtime, b.retryN, retryHandler(smp, make([]atomic.Int64, b.retryN)), func(int) {})
	if err != nil {
		logf("chronoq: %v", err)
		return smp.collect(true)
	}
	incomplete := b.runRetries(ctx, "chronoq", smp,
		s.send(false, func(i int) queue.NewJob { return chronoqJob(indexPayload(i, time.Time{}), time.Time{}) }))
	stop()
	return smp.collect(incomplete)
}

func (b *bench) asynqRetry(ctx context.Context, check time.Duration) delays {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	smp := newSampler(b.retryN)
	if !b.reset() {
		return smp.collect(true)
	}
	s := openAsynq(b.addr)
	defer s.close()
	stop, err := s.serve(serverConfig{delayedCheck: check, retryDelay: retryDelay}, retryHandler(smp, make([]atomic.Int64, b.retryN)))
	if err != nil {
		logf("asynq: %v", err)
		return smp.collect(true)
	}
	incomplete := b.runRetries(ctx, fmt.Sprintf("asynq (check %s)", orDefault(check)), smp,
		s.send(func(i int) (*asynq.Task, []asynq.Option) {
			return asynq.NewTask(asynqType, indexPayload(i, time.Time{})), nil
		}))
	stop()
	return smp.collect(incomplete)
}

// runRetries enqueues the jobs of scenario 5, due now, and waits until each
// has run twice or ctx ends; it answers whether it was cut short.
func (b *bench) runRetries(ctx context.Context, name string, smp *sampler, send sendFunc) bool {
	start := time.Now()
	if n, err := produce(ctx, fillProducers, b.retryN, enqueueBatch, send); err != nil {
		logf("%s: enqueue: %d of %d: %v", name, n, b.retryN, err)
	}
	select {
	case <-smp.done:
		logf("%s: %d jobs failed once and ran again, in %s", name, b.retryN, time.Since(start).Round(time.Millisecond))
		return false
	case <-ctx.Done():
		logf("%s: %d of %d retries ran by the deadline", name, smp.n.Load(), b.retryN)
		return true
	}
}

// ---- 6: memory per scheduled job ----

func (b *bench) mem(ctx context.Context, t *table) {
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return
	}
	defer s.close()
	a := openAsynq(b.addr)
	defer a.close()
	at := time.Now().Add(memAhead)
	c := b.memRun(ctx, "chronoq (EnqueueBatch of 100)", s.send(false, func(i int) queue.NewJob {
		return chronoqJob(indexPayload(i, time.Time{}), at)
	}))
	as := b.memRun(ctx, "asynq", a.send(func(i int) (*asynq.Task, []asynq.Option) {
		return asynq.NewTask(asynqType, indexPayload(i, time.Time{})), []asynq.Option{asynq.ProcessAt(at)}
	}))
	cell := func(m memory) string { return t.star(fmt.Sprintf("%.0f B", m.perJob()), m.incomplete) }
	t.add("6. Redis memory per scheduled job",
		cell(c), cell(as), lowerBetter(c.perJob(), as.perJob()))
}

func (b *bench) memRun(ctx context.Context, name string, send sendFunc) memory {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	res := memory{want: b.memN, incomplete: true}
	if !b.reset() {
		return res
	}
	before, err := usedMemory(b.ctl)
	if err != nil {
		logf("INFO memory: %v", err)
		return res
	}
	n, err := produce(ctx, fillProducers, b.memN, enqueueBatch, send)
	after, merr := usedMemory(b.ctl)
	if merr != nil {
		logf("INFO memory: %v", merr)
		return res
	}
	res.done, res.bytes, res.incomplete = n, after-before, err != nil
	if err != nil {
		logf("%s: %v", name, err)
	}
	logf("%s: %d jobs scheduled, used_memory +%d bytes", name, n, res.bytes)
	return res
}

// ---- cells ----

func (t *table) star(s string, incomplete bool) string {
	if incomplete {
		t.incomplete = true
		return s + " *"
	}
	return s
}

func (t *table) rate(x throughput) string { return t.star(thousands(x.perSec()), x.incomplete) }

func (t *table) cpuCell(x throughput) string {
	return t.star(fmt.Sprintf("%.1f", x.cpuPerJob()), x.incomplete)
}

func (t *table) clientCell(x throughput) string {
	return t.star(fmt.Sprintf("%.1f", x.clientPerJob()), x.incomplete)
}

// callsCell is the split pass's commands a job, by phase and in all.
func (t *table) callsCell(x throughput, p phases) string {
	if !p.ok || x.done == 0 {
		return "n/a"
	}
	parts := make([]string, 0, nPhases)
	for ph := range nPhases {
		parts = append(parts, fmt.Sprintf("%.2f", p.callsPerJob(ph, x.done)))
	}
	return t.star(strings.Join(parts, "+")+fmt.Sprintf(" = %.2f", p.totalCallsPerJob(x.done)), x.incomplete)
}

func (t *table) phaseCell(x throughput, p phases, ph phase) string {
	if !p.ok {
		return "n/a"
	}
	return t.star(fmt.Sprintf("%.1f", p.perJob(x, ph)), x.incomplete)
}

func (t *table) earlyCell(d delays) string {
	s := fmt.Sprintf("%d of %d", d.early(), len(d.d))
	if d.early() > 0 {
		s += "; " + dur(d.d[0])
	}
	return t.star(s, d.incomplete)
}

func (t *table) durCell(d delays, v time.Duration, ok bool) string {
	if !ok {
		return t.star("none ran", true)
	}
	return t.star(dur(v), d.incomplete)
}
