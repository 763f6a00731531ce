package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/clockskew"
	"github.com/chronoq/chronoq/testutil/redisproc"
)

// Namespace is the key prefix of every run (each scenario has its own Redis).
const Namespace = "chaos"

// logTail is how much of a process's log, in bytes, a problem quotes.
const logTail = 2000

// Scenario is one battery: a load, a topology and the faults to inject.
type Scenario struct {
	Name string
	// Load.
	Jobs        int           // acknowledged enqueues to reach
	ProduceOver time.Duration // the enqueues are spread over this
	MaxDelay    time.Duration // half the jobs are delayed in [0, MaxDelay)
	PoisonEvery int           // one job in PoisonEvery always fails
	Workers     int           // worker processes
	Concurrency int           // handlers per worker
	Visibility  time.Duration // lease of a claim; heartbeats every third of it
	Serves      int           // chronoq serve instances (promoter + reclaimer)
	// ReclaimInterval is serve's --reclaim-interval.
	ReclaimInterval time.Duration
	// Topology.
	Cluster bool // a 3-master cluster with a replica each, instead of one server
	// Faults, injected for FaultsFor from the start of the load.
	FaultsFor       time.Duration
	WorkerKillEvery time.Duration // SIGKILL a worker and restart it, on average this often
	WorkerStopEvery time.Duration // SIGSTOP a worker past its visibility, then SIGCONT
	RedisKills      int           // SIGKILL redis-server and restart it (AOF)
	MasterRestarts  int           // SIGKILL a cluster master and restart it before failover
	Failovers       int           // CLUSTER FAILOVER on a replica of a queue's master
	ProxyDropEvery  time.Duration // workers and producer talk through proxies that drop this often (each)
	BlackoutEvery   time.Duration // and drop every reply for BlackoutFor this often (each)
	BlackoutFor     time.Duration
	ScriptFlush     time.Duration // SCRIPT FLUSH this often
	// Slot migrations: the first queue's slot moves to another master and
	// back, by hand and slowly (redisproc.MigrateSlot), a round trip about
	// every MigrateEvery (0: never).
	MigrateEvery time.Duration
	MigrateKeys  int           // keys per MIGRATE step
	MigratePause time.Duration // pause between two steps
	// Clocks: serve instance i runs on a clock ServeSkews[i] off the true
	// time, worker slot i on one WorkerSkews[i % len] off (package
	// clockskew); none when empty. Redis's clock, which decides every
	// time, is the host's.
	ServeSkews, WorkerSkews []time.Duration
	// ErrorsFail makes any error that reaches a caller of the engine
	// (producer, workers, serve) a failure, not only the forbidden
	// classes: for a scenario whose faults must cause latency only.
	ErrorsFail bool
	// DrainTimeout bounds the wait, once faults stop, for the queues to empty.
	DrainTimeout time.Duration
	// Workflows: the producer enqueues diamonds of four jobs (package
	// workflow) instead of single jobs; the serve instances' releasers
	// move them on. Jobs is then a multiple of 4.
	Workflows bool
	// ServeKillEvery: SIGKILL a serve instance (its promoter, reclaimer and
	// workflow releaser) and start a new one, on average this often.
	ServeKillEvery time.Duration
	// Flow: every job carries a flow key, the queue holds each key to a
	// max in flight, and an observer checks it (flow.go). With flow keys
	// the load goes to one queue, the first (the one whose slot moves).
	Flow FlowSetup
}

// Scenarios are the batteries, at full size or in the short (CI) form.
func Scenarios(short bool) []Scenario {
	base := Scenario{Jobs: 20_000, ProduceOver: 60 * time.Second, MaxDelay: 60 * time.Second, PoisonEvery: 50,
		Workers: 4, Concurrency: 16, Visibility: 2 * time.Second, Serves: 2, ReclaimInterval: 500 * time.Millisecond,
		DrainTimeout: 3 * time.Minute}
	if short {
		base.Jobs, base.ProduceOver, base.MaxDelay, base.Workers = 3000, 15*time.Second, 10*time.Second, 3
		base.DrainTimeout = 90 * time.Second
	}
	faultsFor := base.ProduceOver + base.MaxDelay
	every := func(long, shortForm time.Duration) time.Duration {
		if short {
			return shortForm
		}
		return long
	}
	single := base
	single.Name = "single"
	single.FaultsFor = faultsFor
	single.WorkerKillEvery = every(4*time.Second, 3*time.Second)
	single.WorkerStopEvery = every(7*time.Second, 5*time.Second)
	single.RedisKills = 2

	cluster := base
	cluster.Name = "cluster"
	cluster.Cluster = true
	cluster.FaultsFor = faultsFor
	cluster.WorkerKillEvery = single.WorkerKillEvery
	cluster.WorkerStopEvery = single.WorkerStopEvery
	cluster.MasterRestarts = 1
	cluster.Failovers = 2
	cluster.ScriptFlush = every(10*time.Second, 5*time.Second)

	client := base
	client.Name = "client"
	client.FaultsFor = faultsFor
	client.ProxyDropEvery = every(700*time.Millisecond, 400*time.Millisecond)
	client.BlackoutEvery, client.BlackoutFor = every(10*time.Second, 5*time.Second), 1500*time.Millisecond
	client.ScriptFlush = every(5*time.Second, 3*time.Second)

	// Nothing but slot migrations: a caller may see latency, never an
	// error. Smaller in the short form, to keep CI's battery short.
	reshard := base
	reshard.Name = "reshard"
	reshard.Cluster = true
	if short {
		reshard.Jobs, reshard.ProduceOver, reshard.MaxDelay = 2000, 12*time.Second, 8*time.Second
	}
	reshard.FaultsFor = reshard.ProduceOver + reshard.MaxDelay
	reshard.MigrateEvery = every(4*time.Second, 2*time.Second)
	reshard.MigrateKeys, reshard.MigratePause = 10, 10*time.Millisecond
	reshard.ErrorsFail = true

	// Promoters, reclaimers and workers on clocks minutes off, while
	// workers are killed and stopped and Redis is killed once: Redis's
	// clock decides, so no job is claimed early and no live lease is
	// taken. Smaller in the short form, to keep CI's battery short.
	skew := base
	skew.Name = "skew"
	skew.Jobs, skew.ProduceOver, skew.MaxDelay = 10_000, 30*time.Second, 30*time.Second
	if short {
		skew.Jobs, skew.ProduceOver, skew.MaxDelay = 1500, 8*time.Second, 6*time.Second
		skew.DrainTimeout = time.Minute
	}
	skew.FaultsFor = skew.ProduceOver + skew.MaxDelay
	skew.WorkerKillEvery = single.WorkerKillEvery
	skew.WorkerStopEvery = single.WorkerStopEvery
	skew.RedisKills = 1
	skew.ServeSkews = []time.Duration{5 * time.Minute, -5 * time.Minute}
	skew.WorkerSkews = []time.Duration{30 * time.Second, -30 * time.Second, 5 * time.Minute, -5 * time.Minute}
	// Workflows: diamonds of four jobs, their children released by the
	// serve instances, while workers are killed and stopped and the serve
	// instances (the releasers) are killed mid-graph: every node runs, lost 0.
	workflows := base
	workflows.Name = "workflow"
	workflows.Workflows = true
	workflows.Jobs, workflows.ProduceOver, workflows.MaxDelay, workflows.PoisonEvery = 8000, 40*time.Second, 0, 0
	if short {
		workflows.Jobs, workflows.ProduceOver = 1600, 12*time.Second
	}
	workflows.FaultsFor = workflows.ProduceOver + 5*time.Second
	workflows.WorkerKillEvery = single.WorkerKillEvery
	workflows.WorkerStopEvery = single.WorkerStopEvery
	workflows.ServeKillEvery = every(3*time.Second, 2*time.Second)
	// Flow keys: 20 keys in one queue, each at most 2 jobs processing,
	// one of them 5, while workers are SIGKILLed mid-job (their jobs
	// count against their keys until their leases lapse) and the
	// queue's slot moves between masters. Smaller in the short form, to
	// keep CI's battery short.
	flow := base
	flow.Name = "flow"
	flow.Cluster = true
	flow.Jobs, flow.ProduceOver, flow.MaxDelay = 8000, 40*time.Second, 20*time.Second
	if short {
		flow.Jobs, flow.ProduceOver, flow.MaxDelay = 1500, 10*time.Second, 4*time.Second
		flow.DrainTimeout = time.Minute
	}
	flow.FaultsFor = flow.ProduceOver + flow.MaxDelay
	flow.WorkerKillEvery = single.WorkerKillEvery
	flow.MigrateEvery = every(4*time.Second, 3*time.Second)
	flow.MigrateKeys, flow.MigratePause = 10, 10*time.Millisecond
	flow.Flow = FlowSetup{Keys: 20, MaxInFlight: 2, Override: 5}
	return []Scenario{single, cluster, client, reshard, skew, workflows, flow}
}

// Options are the binaries and places of a run.
type Options struct {
	Self        string // this program: run again as "worker" and "producer"
	Chronoq     string // the chronoq binary: "serve"
	RedisServer string
	RedisCLI    string
	Root        string // every file of the run goes under Root/<scenario>
	Seed        uint64
	Out         io.Writer // progress lines
}

// slot is a worker's place: its name (and its clock) stays, its process
// changes.
type slot struct {
	name string
	skew time.Duration // its clock's offset from the true time
	mu   sync.Mutex    // held while a fault works on the slot
	proc *redisproc.Child
}

// harness is one scenario under way.
type harness struct {
	o       Options
	sc      Scenario
	dir     string
	start   time.Time
	grp     *Group
	led     *Ledger
	ledAddr string
	target  Target
	single  *RedisServer
	cluster *Cluster
	queues  []string
	place   map[string]string // queue -> its master, for the report
	clocks  map[string]string // process -> its clock's skew, for the report
	qslot   map[string]int    // queue -> its cluster hash slot
	proxies map[string]*Proxy
	slots   []*slot
	serves  []*redisproc.Child // every serve instance started, killed ones included
	live    []*redisproc.Child // the serve instances running, by number (killServes replaces them)
	rng     *rand.Rand
	rngMu   sync.Mutex

	runCtx   context.Context // the whole run's: a fault that must finish ignores the fault period's end, not this
	expected sync.Map        // *redisproc.Child -> struct{}: exits we caused
	mu       sync.Mutex
	problems []string // harness failures: unexpected exits, a fault that could not be injected
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.o.Out, "[%-7s %6.1fs] %s\n", h.sc.Name, time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logf("PROBLEM: %s", msg)
	h.mu.Lock()
	h.problems = append(h.problems, msg)
	h.mu.Unlock()
}

func (h *harness) rand(d time.Duration) time.Duration {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return jitter(h.rng, d)
}

// jitter draws a duration uniformly in [d/2, 3d/2): d on average.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool { return redisproc.Sleep(ctx, d) }

// watch reports p's exit as a problem unless the harness caused it.
func (h *harness) watch(p *redisproc.Child) {
	h.grp.Add(p)
	go func() {
		<-p.Done()
		if _, ok := h.expected.Load(p); !ok {
			h.problem("%s (pid %d) exited on its own: %v; log %s:\n%s", p.Name, p.Pid(), p.Err(), p.LogPath, p.LogTail(logTail))
		}
	}()
}

func (h *harness) expect(p *redisproc.Child) { h.expected.Store(p, struct{}{}) }

// Run runs one scenario and counts it. An error means the harness could
// not run it; a run that found problems answers a Report that does not
// pass.
func Run(ctx context.Context, o Options, sc Scenario) (*Report, error) {
	h := &harness{o: o, sc: sc, dir: filepath.Join(o.Root, sc.Name), start: time.Now(), grp: &Group{},
		proxies: map[string]*Proxy{}, rng: rand.New(rand.NewPCG(o.Seed, 7)), runCtx: ctx}
	defer func() {
		h.grp.Each(h.expect) // from here on every exit is ours
		h.grp.KillAll()
		for _, p := range h.proxies {
			p.Close()
		}
	}()
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return nil, err
	}
	if err := h.setup(ctx); err != nil {
		return nil, err
	}
	defer h.led.Close()
	admin := h.target.Client()
	defer admin.Close()

	h.logf("load: %d jobs over %s, half delayed up to %s, 1 in %d poison; %d workers x %d, visibility %s; faults for %s",
		sc.Jobs, sc.ProduceOver, sc.MaxDelay, sc.PoisonEvery, sc.Workers, sc.Concurrency, sc.Visibility, sc.FaultsFor)
	loadStart := time.Now()
	prod, err := h.startProducer()
	if err != nil {
		return nil, err
	}
	faultCtx, stopFaults := context.WithDeadline(ctx, loadStart.Add(sc.FaultsFor))
	var fwg sync.WaitGroup
	h.injectFaults(faultCtx, &fwg)
	defer func() { stopFaults(); fwg.Wait() }() // a fault under way ends before the processes are killed
	progCtx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		h.progress(progCtx, admin)
	}()
	defer func() { stopProgress(); <-progressDone }()
	flowObs := &flowObserver{f: sc.Flow, peak: map[string]int{}}
	flowDone := make(chan struct{})
	go func() {
		defer close(flowDone)
		if sc.Flow.Keys > 0 {
			h.observeFlow(progCtx, admin, flowObs)
		}
	}()
	defer func() { stopProgress(); <-flowDone }()

	// The producer finishes (bounded), then the faults (bounded by their
	// deadline), then the queues drain (bounded).
	select {
	case <-prod.Done():
		if err := prod.Err(); err != nil {
			h.problem("producer failed: %v:\n%s", err, prod.LogTail(logTail))
		}
	case <-time.After(3*sc.ProduceOver + 90*time.Second):
		h.problem("producer did not finish")
		prod.Kill()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.logf("producer done")
	fwg.Wait()
	for _, p := range h.proxies {
		p.SetEnabled(false)
	}
	h.logf("faults stopped; draining (at most %s)", sc.DrainTimeout)
	drained := h.drain(ctx, admin)
	stopProgress()
	<-progressDone
	<-flowDone
	if sc.Flow.Keys > 0 {
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		flowObs.finish(fctx, admin, h.queues)
		fcancel()
	}
	if !drained {
		h.problem("queues not drained after %s", sc.DrainTimeout)
	}
	h.stopAll()

	rec, err := h.led.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the ledger: %w", err)
	}
	rec.Errors["serve"] = h.serveErrors()
	if b, err := json.Marshal(rec); err == nil {
		_ = os.WriteFile(filepath.Join(h.dir, "ledger.json"), b, 0o644) // for a post-mortem
	}
	snap, err := TakeSnapshot(ctx, admin, Namespace, h.queues)
	if err != nil {
		return nil, err
	}
	r := Check(sc.Name, rec, snap)
	if sc.Flow.Keys > 0 {
		CheckFlow(r, rec, sc.Flow)
		flowObs.report(r)
	}
	if sc.ErrorsFail && r.CallerErrors > 0 {
		r.AddFailure(fmt.Sprintf("%d errors reached callers (only latency is allowed here)", r.CallerErrors))
	}
	r.Duration = time.Since(h.start)
	r.Placement = h.place
	r.Clocks = h.clocks
	h.mu.Lock()
	for _, p := range h.problems {
		r.AddFailure(p)
	}
	h.mu.Unlock()
	h.logf("checked: pass=%v", r.Pass)
	return r, nil
}

// setup starts the ledger, the queue's Redis, the proxies, serve and the
// workers.
func (h *harness) setup(ctx context.Context) error {
	if h.sc.Cluster && h.sc.ProxyDropEvery > 0 {
		// A proxy forwards to one server; a cluster client follows
		// MOVED/ASK to every node's own address, past any proxy.
		return fmt.Errorf("chaos: scenario %s: proxy drops (ProxyDropEvery) need a single server, not a cluster", h.sc.Name)
	}
	ledSrv, err := StartRedis(ctx, h.grp, "ledger", h.o.RedisServer, filepath.Join(h.dir, "ledger"), nil, false)
	if err != nil {
		return err
	}
	h.led, h.ledAddr = OpenLedger(ledSrv.Addr, "run"), ledSrv.Addr
	if h.sc.Cluster {
		err = h.startCluster(ctx)
	} else {
		err = h.startSingle(ctx)
	}
	if err != nil {
		return err
	}
	if h.sc.Flow.Keys > 0 {
		if err := h.flowQueue(ctx); err != nil {
			return err
		}
	}
	h.makeSlots()
	if h.sc.ProxyDropEvery > 0 {
		if err := h.startProxies(); err != nil {
			return err
		}
	}
	return h.startProcesses(ctx)
}

// startCluster starts the queue's Redis Cluster, and picks queues spread
// over its masters.
func (h *harness) startCluster(ctx context.Context) error {
	var err error
	h.cluster, err = StartCluster(ctx, h.grp, h.o.RedisServer, h.o.RedisCLI, filepath.Join(h.dir, "cluster"), 3, 1, 5*time.Second, latencyArgs)
	if err != nil {
		return err
	}
	h.target = Target{Cluster: h.cluster.Seeds()}
	if err := h.pickClusterQueues(); err != nil {
		return err
	}
	h.logf("cluster %v; queues %v", h.cluster.Seeds(), h.place)
	return nil
}

// flowQueue keeps the first queue only (the one whose slot a migration
// moves) and gives it the scenario's flow limits.
func (h *harness) flowQueue(ctx context.Context) error {
	h.queues = h.queues[:1]
	if h.place != nil {
		h.place = map[string]string{h.queues[0]: h.place[h.queues[0]]}
	}
	admin := h.target.Client()
	defer func() { _ = admin.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return h.setFlowLimits(ctx, admin)
}

// startSingle starts the queue's redis-server, durable, with three queues.
func (h *harness) startSingle(ctx context.Context) error {
	var err error
	h.single, err = StartRedis(ctx, h.grp, "redis", h.o.RedisServer, filepath.Join(h.dir, "redis"), append(DurableArgs, latencyArgs...), false)
	if err != nil {
		return err
	}
	h.target = Target{Addr: h.single.Addr}
	h.queues = []string{"alpha", "beta", "gamma"}
	h.logf("redis %s (AOF, fsync always) pid %d; ledger %s", h.single.Addr, h.single.Pid(), h.ledAddr)
	return nil
}

// makeSlots makes the workers' slots, each with its clock's skew, and
// notes every skewed clock (workers' and serves') for the report.
func (h *harness) makeSlots() {
	for i := range h.sc.Workers {
		s := &slot{name: fmt.Sprintf("w%d", i)}
		if len(h.sc.WorkerSkews) > 0 {
			s.skew = h.sc.WorkerSkews[i%len(h.sc.WorkerSkews)]
			h.clock(s.name, s.skew)
		}
		h.slots = append(h.slots, s)
	}
	for i, d := range h.sc.ServeSkews {
		if i < h.sc.Serves {
			h.clock(fmt.Sprintf("serve-%d", i), d)
		}
	}
	if len(h.clocks) > 0 {
		h.logf("clocks off the true time: %s", joinMap(h.clocks))
	}
}

// startProxies starts a dropping proxy for the producer and for each
// worker slot; each drop is recorded as a fault on its process.
func (h *harness) startProxies() error {
	names := []string{"producer"}
	for _, s := range h.slots {
		names = append(names, s.name)
	}
	for i, n := range names {
		p, err := StartProxy(n, h.single.Addr, h.sc.ProxyDropEvery, h.o.Seed+uint64(i), func(armed, dropped time.Time, cmd string) {
			h.fault(Fault{Kind: FaultProxyDrop, Target: n, Start: armed.UnixNano(), End: dropped.UnixNano(), Note: cmd})
		})
		if err != nil {
			return err
		}
		h.proxies[n] = p
	}
	return nil
}

// startProcesses starts the serve instances, then a worker in each slot.
func (h *harness) startProcesses(ctx context.Context) error {
	for i := range h.sc.Serves {
		if err := h.startServe(ctx, i); err != nil {
			return err
		}
	}
	h.live = append([]*redisproc.Child(nil), h.serves...)
	for _, s := range h.slots {
		if err := h.startWorker(s); err != nil {
			return err
		}
	}
	return nil
}

// via is the Redis a process named name talks to: its proxy, if any.
func (h *harness) via(name string) Target {
	if p := h.proxies[name]; p != nil {
		return Target{Addr: p.Addr}
	}
	return h.target
}

// pickClusterQueues picks four queue names whose slots spread over every
// master.
func (h *harness) pickClusterQueues() error {
	nodes, err := h.cluster.Topology()
	if err != nil {
		return err
	}
	h.place, h.qslot = map[string]string{}, map[string]int{}
	perMaster := map[string]int{}
	for i := 0; i < 200 && len(h.queues) < 4; i++ {
		q := fmt.Sprintf("q%02d", i)
		s, err := h.cluster.KeySlot(q)
		if err != nil {
			return err
		}
		m, ok := MasterOf(nodes, s)
		if !ok {
			continue
		}
		if perMaster[m.ID] > 0 && len(perMaster) < 3 {
			continue // first one queue on each master
		}
		perMaster[m.ID]++
		h.queues = append(h.queues, q)
		h.qslot[q] = s
		h.place[q] = fmt.Sprintf("%s (slot %d)", m.Addr, s)
	}
	if len(perMaster) < 2 {
		return errors.New("chaos: could not spread the queues over two masters")
	}
	return nil
}

// clock notes, for the report, that process name runs on a clock skew off.
func (h *harness) clock(name string, skew time.Duration) {
	if h.clocks == nil {
		h.clocks = map[string]string{}
	}
	s := skew.String()
	if skew > 0 {
		s = "+" + s
	}
	h.clocks[name] = s
}

func (h *harness) fault(f Fault) {
	if err := h.led.RecordFault(f); err != nil {
		h.problem("recording a fault: %v", err)
	}
	switch f.Kind {
	case FaultProxyDrop, FaultProxyBlackout, FaultScriptFlush, FaultRedisStall: // too many to log
	default:
		h.logf("fault %s %s (%.1fs)", f.Kind, cmp.Or(f.Target, f.Note), time.Duration(f.End-f.Start).Seconds())
	}
}

func (h *harness) startServe(ctx context.Context, i int) error {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--namespace", Namespace,
		"--reclaim-interval", h.sc.ReclaimInterval.String(), "--log-level", "info"}
	if h.sc.Cluster {
		args = append(args, "--redis-cluster", strings.Join(h.target.Cluster, ","))
	} else {
		args = append(args, "--redis-url", "redis://"+h.target.Addr)
	}
	logPath := filepath.Join(h.dir, fmt.Sprintf("serve-%d.log", i))
	var env []string
	if i < len(h.sc.ServeSkews) {
		env = append(env, clockskew.Env+"="+h.sc.ServeSkews[i].String())
	}
	p, err := redisproc.StartChildEnv(fmt.Sprintf("serve-%d", i), h.o.Chronoq, args, env, "", logPath)
	if err != nil {
		return err
	}
	h.watch(p)
	h.serves = append(h.serves, p)
	// Ready once it says so (bounded).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte("chronoq serving")) {
			return nil
		}
		if p.Running() && sleep(wctx, 50*time.Millisecond) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("chaos: serve-%d did not start:\n%s", i, p.LogTail(logTail))
	}
}

func (h *harness) startWorker(s *slot) error {
	b, _ := json.Marshal(WorkerConfig{Slot: s.name, Redis: h.via(s.name), Ledger: h.ledAddr, Prefix: "run", Namespace: Namespace,
		Queues: h.queues, Concurrency: h.sc.Concurrency, ClockSkew: s.skew})
	p, err := redisproc.StartChild("worker-"+s.name, h.o.Self, []string{"worker", "-config", string(b)}, "", filepath.Join(h.dir, "worker-"+s.name+".log"))
	if err != nil {
		return err
	}
	h.watch(p)
	s.proc = p
	return nil
}

func (h *harness) startProducer() (*redisproc.Child, error) {
	cfg := ProducerConfig{Redis: h.via("producer"), Ledger: h.ledAddr, Prefix: "run", Namespace: Namespace, Queues: h.queues,
		Jobs: h.sc.Jobs, Over: h.sc.ProduceOver, MaxDelay: h.sc.MaxDelay, PoisonEvery: h.sc.PoisonEvery,
		Visibility: h.sc.Visibility, MaxAttempts: 25, PoisonMaxAttempts: 3, Concurrency: 8, Seed: h.o.Seed, Workflows: h.sc.Workflows,
		FlowKeys: h.sc.Flow.Keys}
	b, _ := json.Marshal(cfg)
	p, err := redisproc.StartChild("producer", h.o.Self, []string{"producer", "-config", string(b)}, "", filepath.Join(h.dir, "producer.log"))
	if err != nil {
		return nil, err
	}
	h.grp.Add(p) // its exit is watched by Run
	return p, nil
}

// injectFaults starts one goroutine per kind of fault; each ends with ctx.
func (h *harness) injectFaults(ctx context.Context, wg *sync.WaitGroup) {
	sc := h.sc
	for _, p := range h.proxies {
		p.SetEnabled(true)
		if sc.BlackoutEvery > 0 {
			wg.Go(func() { h.blackouts(ctx, p) })
		}
	}
	if sc.WorkerKillEvery > 0 {
		wg.Go(func() { h.killWorkers(ctx) })
	}
	if sc.WorkerStopEvery > 0 {
		wg.Go(func() { h.stopWorkers(ctx) })
	}
	if sc.ScriptFlush > 0 {
		wg.Go(func() { h.flushScripts(ctx) })
	}
	if sc.RedisKills > 0 || sc.MasterRestarts > 0 || sc.Failovers > 0 {
		wg.Go(func() { h.serverFaults(ctx) })
	}
	if sc.MigrateEvery > 0 {
		wg.Go(func() { h.migrateSlots(ctx) })
	}
	if sc.ServeKillEvery > 0 {
		wg.Go(func() { h.killServes(ctx) })
	}
}

// killServes SIGKILLs a serve instance, about every ServeKillEvery, and
// starts a new one in its place (with a log of its own): its releaser
// dies wherever it was, between any two of its steps.
func (h *harness) killServes(ctx context.Context) {
	for sleep(ctx, h.rand(h.sc.ServeKillEvery)) {
		h.rngMu.Lock()
		i := h.rng.IntN(h.sc.Serves)
		h.rngMu.Unlock()
		old := h.live[i]
		pid := old.Pid()
		h.expect(old)
		t0 := time.Now()
		old.Kill()
		if err := h.startServe(ctx, len(h.serves)); err != nil {
			if ctx.Err() == nil {
				h.problem("restarting serve: %v", err)
			}
			return
		}
		h.live[i] = h.serves[len(h.serves)-1]
		h.fault(Fault{Kind: FaultServeKill, Target: fmt.Sprintf("serve-%d", i), Pid: pid, Start: t0.UnixNano(), End: time.Now().UnixNano()})
	}
}

// pick takes a worker slot no other fault holds, locked; nil if none.
func (h *harness) pick() *slot {
	h.rngMu.Lock()
	order := h.rng.Perm(len(h.slots))
	h.rngMu.Unlock()
	for _, i := range order {
		if h.slots[i].mu.TryLock() {
			return h.slots[i]
		}
	}
	return nil
}

// onRandomSlot calls fn, about every `every`, on a worker slot that no
// other fault holds, until ctx ends.
func (h *harness) onRandomSlot(ctx context.Context, every time.Duration, fn func(s *slot)) {
	for sleep(ctx, h.rand(every)) {
		if s := h.pick(); s != nil {
			fn(s)
			s.mu.Unlock()
		}
	}
}

func (h *harness) killWorkers(ctx context.Context) {
	h.onRandomSlot(ctx, h.sc.WorkerKillEvery, func(s *slot) {
		old := s.proc
		pid := old.Pid()
		h.expect(old)
		t0 := time.Now()
		old.Kill()
		time.Sleep(200 * time.Millisecond)
		if err := h.startWorker(s); err != nil {
			h.problem("restarting worker %s: %v", s.name, err)
		}
		h.fault(Fault{Kind: FaultWorkerKill, Target: s.name, Pid: pid, Start: t0.UnixNano(), End: time.Now().UnixNano()})
	})
}

func (h *harness) stopWorkers(ctx context.Context) {
	// Past the visibility and two reclaim sweeps: the jobs it holds are
	// taken back and run elsewhere while it sleeps.
	hold := h.sc.Visibility + 2*h.sc.ReclaimInterval + time.Second
	h.onRandomSlot(ctx, h.sc.WorkerStopEvery, func(s *slot) {
		p := s.proc
		t0 := time.Now()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return
		}
		time.Sleep(hold) // not cut short: the worker must be resumed
		_ = p.Signal(syscall.SIGCONT)
		h.fault(Fault{Kind: FaultWorkerStop, Target: s.name, Pid: p.Pid(), Start: t0.UnixNano(), End: time.Now().UnixNano()})
	})
}

// blackouts cuts every reply to one process for BlackoutFor, now and then.
func (h *harness) blackouts(ctx context.Context, p *Proxy) {
	for sleep(ctx, h.rand(h.sc.BlackoutEvery)) {
		t0 := time.Now()
		p.Blackout(h.sc.BlackoutFor)
		time.Sleep(h.sc.BlackoutFor)
		h.fault(Fault{Kind: FaultProxyBlackout, Target: p.Name, Start: t0.UnixNano(), End: time.Now().UnixNano()})
	}
}

func (h *harness) flushScripts(ctx context.Context) {
	for sleep(ctx, h.sc.ScriptFlush) {
		t := time.Now().UnixNano()
		for _, a := range h.redisAddrs() {
			_, _ = redisproc.Do(a, "SCRIPT", "FLUSH") // a node being restarted has no scripts anyway
		}
		h.fault(Fault{Kind: FaultScriptFlush, Start: t, End: t})
	}
}

// serverFaults kills the Redis server, restarts a cluster master and fails
// masters over at evenly spaced moments of the fault period.
func (h *harness) serverFaults(ctx context.Context) {
	// Failovers first and last, the master restarts between them.
	var plan []string
	plan = append(plan, slices.Repeat([]string{FaultRedisKill}, h.sc.RedisKills)...)
	plan = append(plan, slices.Repeat([]string{FaultFailover}, h.sc.Failovers/2)...)
	plan = append(plan, slices.Repeat([]string{FaultMasterRestart}, h.sc.MasterRestarts)...)
	plan = append(plan, slices.Repeat([]string{FaultFailover}, h.sc.Failovers-h.sc.Failovers/2)...)
	begin := time.Now()
	for i, kind := range plan {
		at := begin.Add(h.sc.FaultsFor * time.Duration(i+1) / time.Duration(len(plan)+1))
		if !sleep(ctx, time.Until(at)) {
			return
		}
		t0 := time.Now()
		var err error
		target := ""
		switch kind {
		case FaultRedisKill:
			pid := h.single.Pid()
			h.single.Kill()
			time.Sleep(time.Second)
			err = h.single.Restart(context.WithoutCancel(ctx))
			target = fmt.Sprintf("pid %d", pid)
		case FaultMasterRestart, FaultFailover:
			target, err = h.clusterFault(context.WithoutCancel(ctx), kind, i)
		}
		if err != nil {
			h.problem("%s: %v", kind, err)
		}
		// Global faults: every process is hit.
		h.fault(Fault{Kind: kind, Start: t0.UnixNano(), End: time.Now().UnixNano(), Note: target})
	}
}

// clusterFault restarts the master of one of the queues, or fails it over
// to its replica; the i-th fault takes the i-th queue.
func (h *harness) clusterFault(ctx context.Context, kind string, i int) (string, error) {
	nodes, err := h.cluster.Topology()
	if err != nil {
		return "", err
	}
	q := h.queues[i%len(h.queues)]
	s := h.qslot[q]
	m, ok := MasterOf(nodes, s)
	if !ok {
		return "", fmt.Errorf("no master for slot %d", s)
	}
	if kind == FaultMasterRestart {
		return "master " + m.Addr + " of " + q, h.cluster.RestartNode(ctx, m.Addr, 500*time.Millisecond)
	}
	rep, ok := ReplicaOf(nodes, m.ID)
	if !ok {
		return "", fmt.Errorf("no replica of %s", m.Addr)
	}
	return "replica " + rep.Addr + " takes over " + m.Addr + " (" + q + ")", h.cluster.Failover(ctx, rep.Addr)
}

// latencyArgs turn on Redis's latency monitor: an fsync or a command
// slower than this is remembered, and the battery records it as an
// observed stall.
var latencyArgs = []string{"--latency-monitor-threshold", "250"}

// redisAddrs are the queue's Redis servers: the cluster's nodes, or the
// one server.
func (h *harness) redisAddrs() []string {
	if h.cluster != nil {
		return h.cluster.Seeds()
	}
	return []string{h.single.Addr}
}

// pollLatency records, as observed stalls, the slow events the queue's
// Redis servers remembered since the last poll.
func (h *harness) pollLatency(seen map[string]bool) {
	for _, a := range h.redisAddrs() {
		v, err := redisproc.Do(a, "LATENCY", "LATEST")
		if err != nil {
			continue
		}
		events, _ := v.([]any)
		for _, e := range events {
			ev, _ := e.([]any)
			if len(ev) == 0 {
				continue
			}
			name := redisproc.AsString(ev[0])
			hv, err := redisproc.Do(a, "LATENCY", "HISTORY", name)
			if err != nil {
				continue
			}
			hist, _ := hv.([]any)
			for _, x := range hist {
				pt, _ := x.([]any)
				if len(pt) != 2 {
					continue
				}
				ts, _ := pt[0].(int64)
				ms, _ := pt[1].(int64)
				key := fmt.Sprint(a, name, ts, ms)
				if seen[key] {
					continue
				}
				seen[key] = true
				// The history has whole seconds: widen the window by one.
				h.fault(Fault{Kind: FaultRedisStall, Start: ts*1e9 - ms*1e6 - 1e9, End: ts*1e9 + 1e9,
					Note: fmt.Sprintf("%s %s %d ms", a, name, ms)})
			}
		}
	}
}

// progress logs the counts every few seconds, and collects Redis's slow
// events.
func (h *harness) progress(ctx context.Context, admin redis.UniversalClient) {
	seen := map[string]bool{}
	defer h.pollLatency(seen)
	for sleep(ctx, 5*time.Second) {
		h.pollLatency(seen)
		acked, _ := h.led.Len(ctx, "ack")
		execs, _ := h.led.Len(ctx, "exec")
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		depth, err := Depths(dctx, admin, Namespace, h.queues)
		cancel()
		d := fmt.Sprint(depth)
		if err != nil {
			d = "? (" + ClassifyText(err.Error()) + ")"
		}
		h.logf("acknowledged %d, runs %d, waiting or running %s", acked, execs/2, d)
	}
}

// drain waits until nothing is scheduled, pending, processing or leased,
// twice in a row, for at most DrainTimeout.
func (h *harness) drain(ctx context.Context, admin redis.UniversalClient) bool {
	ctx, cancel := context.WithTimeout(ctx, h.sc.DrainTimeout)
	defer cancel()
	zero := 0
	for sleep(ctx, 500*time.Millisecond) {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		n, err := Depths(dctx, admin, Namespace, h.queues)
		if err == nil && h.sc.Workflows {
			// A workflow's outbox entries may still release jobs.
			var left int
			left, err = outboxesLeft(dctx, admin, Namespace, h.queues)
			n += int64(left)
		}
		dcancel()
		if err == nil && n == 0 {
			if zero++; zero == 2 {
				h.logf("drained")
				return true
			}
		} else {
			zero = 0
		}
	}
	return false
}

// serveErrors counts, by class, the errors the serve instances logged
// (their promoters and reclaimers are callers of the engine too).
func (h *harness) serveErrors() map[string]int64 {
	out := map[string]int64{}
	for _, p := range h.serves {
		b, _ := os.ReadFile(p.LogPath)
		for line := range strings.Lines(string(b)) {
			if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
				continue
			}
			_, e, ok := strings.Cut(line, " err=")
			if !ok {
				continue
			}
			out[ClassifyText(strings.Trim(strings.TrimSpace(e), `"`))]++
		}
	}
	return out
}

// stopAll stops the workers (gracefully: they have nothing left to run)
// and the serve instances.
func (h *harness) stopAll() {
	var wg sync.WaitGroup
	for _, s := range h.slots {
		h.expect(s.proc)
		wg.Go(func() { s.proc.Stop(15 * time.Second) })
	}
	for _, p := range h.serves {
		h.expect(p)
		wg.Go(func() { p.Stop(15 * time.Second) })
	}
	wg.Wait()
	for _, s := range h.slots {
		if err := s.proc.Err(); err != nil {
			h.problem("worker %s did not stop cleanly: %v", s.name, err)
		}
	}
}
