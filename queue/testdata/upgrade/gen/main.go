// Command gen records an upgrade dataset: a namespace filled, through the
// public Go API of the checkout it is built in, with jobs in every state a
// queue holds across an upgrade, and then dumped key by key to portable
// JSON, together with what that release's reads answered. The test
// TestUpgradeDataset (queue/upgrade_test.go) loads every dataset under
// queue/testdata/upgrade into a fresh namespace and drives the code of the
// checkout it runs in over it: the new release must read the old one's
// records as the old one did, and finish every job in them.
//
// To record the dataset of a release (here ec3318c) from a newer checkout:
//
//	git worktree add /tmp/gen-old ec3318c
//	mkdir -p /tmp/gen-old/queue/testdata/upgrade
//	cp -r queue/testdata/upgrade/gen /tmp/gen-old/queue/testdata/upgrade/
//	(cd /tmp/gen-old && go run ./queue/testdata/upgrade/gen -release ec3318c) \
//	    > queue/testdata/upgrade/ec3318c.json
//	git worktree remove --force /tmp/gen-old
//
// It starts a redis-server of its own (on a unix socket in a temporary
// directory; -redis names another, whose namespace "upgen" it must be
// free to fill) and writes the dataset to standard output. It fills the
// namespace through the public API of packages queue, workflow and cron
// only, and reads it through that API and the inspection dump
// (internal/plumbing's Client.Dump), so it builds against any release
// that has them; a release whose API differs needs its own copy of this
// file.
//
// Times: the client runs on a fake clock that Redis's clock follows
// (queue.Config.FollowClock), set to 2030-01-02T03:04:05Z, so the dataset's
// times are near that instant whatever day it is recorded on.
// "recorded_at_us" is Redis's time (as the scripts read it) when the dump
// began, or a few milliseconds after (the fake clock plus the real time
// since the client was made, which Redis's clock cannot be past): a test that loads the dataset runs its client on a
// fake clock set to it, so the records' absolute times (due scores,
// lease deadlines, completion times) mean to it what they meant here.
//
// The dataset's format: one JSON object, "keys" each key of the
// namespace ("key" relative to it, "type", "pttl_ms" when it expires,
// and the contents: "hash" field -> value, "list" elements, "zset"
// members with their scores as Redis printed them, "set" members,
// "string", "stream" entries with their ids and the stream's last id,
// entries added, max deleted id and consumer groups). A value that is not
// valid UTF-8 is written as {"b64": "..."}. "cases" names each job made
// here (queue, id, claim tokens); "reads" holds what that release's reads
// answered at the end (Get and Jobs of every case, List by status,
// Stats, Limits, the inspection dump of each queue, logs, artifacts, the
// workflow and the cron entry), as encoding/json writes its types.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/workflow"
)

// Namespace is the namespace the dataset is recorded in.
const Namespace = "upgen"

// The queues: most cases in Main, a workflow in Flow, cron's ticks in
// Cron, and a paused queue with limits in Held.
const (
	Main = "up"
	Flow = "flow"
	Cron = "cronq"
	Held = "held"
)

// start is the fake clock's instant.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func main() {
	addr := flag.String("redis", "", "address of a redis-server to use (default: start one)")
	release := flag.String("release", "", "the release recorded (a commit), written into the dataset")
	flag.Parse()
	if *release == "" {
		log.Fatal("gen: -release is required")
	}
	ctx := context.Background()
	opt := &redis.Options{Addr: *addr, Protocol: 2}
	if *addr == "" {
		stop, sock := startRedis()
		defer stop()
		opt = &redis.Options{Network: "unix", Addr: sock, Protocol: 2}
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if n, err := rdb.Keys(ctx, Namespace+":*").Result(); err != nil || len(n) > 0 {
		log.Fatalf("gen: namespace %s must be empty (%d keys, %v)", Namespace, len(n), err)
	}
	ds, err := record(ctx, rdb, *release)
	if err != nil {
		log.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(ds); err != nil {
		log.Fatal(err)
	}
}

// startRedis starts a redis-server on a unix socket of a temporary
// directory, without persistence; stop ends it.
func startRedis() (stop func(), sock string) {
	dir, err := os.MkdirTemp("", "upgen")
	if err != nil {
		log.Fatal(err)
	}
	sock = filepath.Join(dir, "redis.sock")
	cmd := exec.CommandContext(context.Background(), "redis-server", //nolint:gosec // G204: the path is a temporary directory of this program's own
		"--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
	for i := 0; ; i++ {
		c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
		err := c.Ping(context.Background()).Err()
		_ = c.Close()
		if err == nil {
			return stop, sock
		}
		if i == 100 {
			stop()
			log.Fatalf("gen: redis-server did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dataset is the file gen writes.
type Dataset struct {
	Format       int              `json:"format"`
	Release      string           `json:"release"`
	Namespace    string           `json:"namespace"`
	RedisVersion string           `json:"redis_version"`
	RecordedAtUs int64            `json:"recorded_at_us"`
	Cases        map[string]*Case `json:"cases"`
	Reads        Reads            `json:"reads"`
	Keys         []Key            `json:"keys"`
}

// Case is a job made by gen, by the name the test knows it by.
type Case struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	// Token is its current claim's token (processing jobs) or the token
	// of its last claim (a job whose end a retried ack may still ask
	// about); Stale an earlier claim's, which must be refused.
	Token string `json:"token,omitempty"`
	Stale string `json:"stale,omitempty"`
	// Idem is its idempotency key.
	Idem string `json:"idem,omitempty"`
	// Labels are the labels a claimer needs to receive it.
	Labels []string `json:"labels,omitempty"`
}

// Reads are what the release's reads answered once the dataset was made.
type Reads struct {
	// Get: case name -> queue.Client.Get's job, nil for ErrNotFound.
	Get map[string]*queue.Job `json:"get"`
	// List: queue -> status -> the ids List answered, in order.
	List map[string]map[queue.Status][]string `json:"list"`
	// Jobs: case name -> queue.Client.Jobs's job (all read in one call),
	// nil for a job that is gone.
	Jobs map[string]*queue.Job `json:"jobs"`
	// Limits: queue -> queue.Client.Limits.
	Limits map[string]queue.Limits `json:"limits"`
	// Stats: queue -> queue.Client.Stats.
	Stats map[string]queue.Stats `json:"stats"`
	// Dump: queue -> the inspection read of the whole queue
	// (plumbing.Client.Dump, a *queue.Dump).
	Dump map[string]any `json:"dump"`
	// Logs and Artifacts: case name -> what they answered.
	Logs      map[string]queue.LogPage   `json:"logs"`
	Artifacts map[string]json.RawMessage `json:"artifacts"`
	Queues    []string                   `json:"queues"`
	Workflow  *workflow.Workflow         `json:"workflow"`
	CronEntry cron.Entry                 `json:"cron_entry"`
}

// Key is one key of the namespace.
type Key struct {
	Key    string           `json:"key"`
	Type   string           `json:"type"`
	PTTLMs int64            `json:"pttl_ms,omitempty"`
	String *Bytes           `json:"string,omitempty"`
	Hash   map[string]Bytes `json:"hash,omitempty"`
	List   []Bytes          `json:"list,omitempty"`
	Set    []Bytes          `json:"set,omitempty"`
	Zset   []Member         `json:"zset,omitempty"`
	Stream *Stream          `json:"stream,omitempty"`
}

// Member is a member of a sorted set and its score, as Redis prints it.
type Member struct {
	Member Bytes  `json:"member"`
	Score  string `json:"score"`
}

// Stream is a stream's entries and the state XSETID and XGROUP restore.
type Stream struct {
	Entries      []Entry `json:"entries"`
	LastID       string  `json:"last_id"`
	EntriesAdded int64   `json:"entries_added"`
	MaxDeletedID string  `json:"max_deleted_id"`
	Groups       []Group `json:"groups"`
}

// Entry is one stream entry: its id and its fields and values in order.
type Entry struct {
	ID     string  `json:"id"`
	Fields []Bytes `json:"fields"`
}

// Group is a consumer group of a stream.
type Group struct {
	Name            string `json:"name"`
	LastDeliveredID string `json:"last_delivered_id"`
	EntriesRead     int64  `json:"entries_read"`
}

// Bytes is a Redis value: a JSON string when it is valid UTF-8, else
// {"b64": base64}.
type Bytes string

// MarshalJSON writes b as a string or as {"b64": ...}.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"b64": base64.StdEncoding.EncodeToString([]byte(b))})
}

// record fills the namespace and dumps it.
func record(ctx context.Context, rdb *redis.Client, release string) (*Dataset, error) {
	clock := clockwork.NewFakeClockAt(start)
	realStart := time.Now() // before the client's first script: Redis's clock is at most clock + the time since
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: Namespace, Clock: clock, FollowClock: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	wf, err := workflow.New(workflow.Config{Queue: c})
	if err != nil {
		return nil, err
	}
	crons := cron.NewStore(c)
	g := &gen{ctx: ctx, c: c, clock: clock, cases: map[string]*Case{}}

	// A cron entry and one job of it (pending in Cron).
	entry := cron.Entry{Name: "hourly", Schedule: "@every 1h", Queue: Cron, Kind: "cron.tick", Payload: json.RawMessage(`{"report":"hourly"}`)}
	if err := crons.Register(ctx, entry); err != nil {
		return nil, err
	}
	tick, err := crons.Trigger(ctx, entry.Name)
	if err != nil {
		return nil, err
	}
	g.cases["cron-tick"] = &Case{Queue: Cron, ID: tick.ID}

	// A queue with limits, one job in flight and two pending, paused.
	if _, err := c.SetLimits(ctx, Held, queue.Limits{Rate: 100, Burst: 5, MaxInFlight: 2}); err != nil {
		return nil, err
	}
	for _, name := range []string{"held-proc", "held-a", "held-b"} {
		g.enqueue(name, queue.NewJob{Queue: Held, Kind: "calc.sum", Payload: json.RawMessage(`{"held":"` + name + `"}`)})
	}
	g.claim("held-proc", queue.ClaimOptions{})
	if err := c.Pause(ctx, Held); err != nil {
		return nil, err
	}

	// A workflow: parent processing (claimed), child waiting on it.
	w, err := wf.Enqueue(ctx, workflow.Spec{Nodes: []workflow.Node{
		{Name: "parent", Job: queue.NewJob{Queue: Flow, Kind: "wf.parent", Payload: json.RawMessage(`{"step":1}`)}},
		{Name: "child", DependsOn: []string{"parent"}, Job: queue.NewJob{Queue: Flow, Kind: "wf.child", Payload: json.RawMessage(`{"step":2}`)}},
	}})
	if err != nil {
		return nil, err
	}
	for _, n := range w.Nodes {
		g.cases["wf-"+n.Name] = &Case{Queue: Flow, ID: n.JobID}
	}
	g.claim("wf-parent", queue.ClaimOptions{})

	noJitter := func(initial time.Duration) *queue.Backoff {
		return &queue.Backoff{Initial: initial, Factor: 2, Max: time.Hour, Jitter: 0}
	}

	// Dead after its attempts: one failure, its retry, a last failure.
	g.enqueue("dead-retried", queue.NewJob{Kind: "mail.send", Payload: json.RawMessage(`{"to":"a@example.com"}`), MaxAttempts: 2, Backoff: noJitter(time.Second)})
	g.claim("dead-retried", queue.ClaimOptions{})
	g.fail("dead-retried", queue.FailOptions{Error: "smtp: connection refused"})
	clock.Advance(1100 * time.Millisecond)
	g.claim("dead-retried", queue.ClaimOptions{})
	g.fail("dead-retried", queue.FailOptions{Error: "smtp: 550 mailbox unavailable"})

	// A lease that lapsed and was reclaimed, then claimed again: two
	// tokens, the first stale.
	g.enqueue("proc-stale", queue.NewJob{Kind: "img.resize", Payload: json.RawMessage(`{"img":7}`)})
	g.claim("proc-stale", queue.ClaimOptions{Visibility: 500 * time.Millisecond})
	first := g.cases["proc-stale"].Token
	clock.Advance(600 * time.Millisecond)
	ids, err := c.Reclaim(ctx, Main)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ids, g.cases["proc-stale"].ID) {
		return nil, fmt.Errorf("gen: reclaim took back %v, not the lapsed lease", ids)
	}
	g.claim("proc-stale", queue.ClaimOptions{})
	g.cases["proc-stale"].Stale = first
	// No clock moves from here on: every due time below is relative to now.

	// Completed, with results, kept for their retention.
	g.enqueue("done-small", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":1,"b":2}`)})
	g.claim("done-small", queue.ClaimOptions{})
	g.complete("done-small", queue.CompleteOptions{Result: json.RawMessage(`{"sum":3}`)})
	g.enqueue("done-large", queue.NewJob{Kind: "report.build", Payload: large("payload"), IdempotencyKey: "idem-done", ResultTTL: 2 * time.Hour})
	g.claim("done-large", queue.ClaimOptions{})
	g.complete("done-large", queue.CompleteOptions{Result: large("result"),
		Artifacts: map[string]json.RawMessage{"summary": json.RawMessage(`{"pages":12}`), "url": json.RawMessage(`"https://example.com/r/1"`)}})

	// Dead at once (Fail with Dead).
	g.enqueue("dead-forced", queue.NewJob{Kind: "mail.send", Payload: json.RawMessage(`{"to":"b@example.com"}`)})
	g.claim("dead-forced", queue.ClaimOptions{})
	g.fail("dead-forced", queue.FailOptions{Error: "fatal: bad address", Dead: true})

	// Deleted jobs whose tombstones answer retried calls: a completed one
	// (its ack kept) and a canceled one.
	g.enqueue("tomb-done", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":2,"b":2}`)})
	g.claim("tomb-done", queue.ClaimOptions{})
	g.complete("tomb-done", queue.CompleteOptions{Result: json.RawMessage(`{"sum":4}`)})
	g.cancel("tomb-done")
	g.enqueue("tomb-canceled", queue.NewJob{Kind: "calc.sum"})
	g.cancel("tomb-canceled")
	g.cancel("tomb-canceled")

	// Canceled, kept for their retention: one pending, one scheduled.
	g.enqueue("canceled-pending", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":5}`)})
	g.cancel("canceled-pending")
	g.enqueue("canceled-scheduled", queue.NewJob{Kind: "calc.sum", Delay: time.Hour})
	g.cancel("canceled-scheduled")

	// A retry waiting in the schedule, due 20 s from now.
	g.enqueue("retry-waiting", queue.NewJob{Kind: "http.call", Payload: json.RawMessage(`{"url":"https://example.com/x"}`), MaxAttempts: 3})
	g.claim("retry-waiting", queue.ClaimOptions{})
	g.fail("retry-waiting", queue.FailOptions{Error: "http: 503", RetryAt: clock.Now().Add(20 * time.Second)})

	// Processing, leases running (30 s, the default), tokens kept.
	g.enqueue("proc-complete", queue.NewJob{Kind: "img.resize", Payload: json.RawMessage(`{"img":1}`)})
	g.claim("proc-complete", queue.ClaimOptions{})
	g.enqueue("proc-fail", queue.NewJob{Kind: "img.resize", Payload: json.RawMessage(`{"img":2}`), Backoff: noJitter(time.Second)})
	g.claim("proc-fail", queue.ClaimOptions{})
	g.enqueue("proc-beat", queue.NewJob{Kind: "video.encode", Payload: large("video")})
	g.claim("proc-beat", queue.ClaimOptions{})
	pb := g.cases["proc-beat"]
	if _, err := c.Heartbeat(ctx, Main, pb.ID, pb.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 42.5, Message: "pass 1 of 2"}}); err != nil {
		return nil, err
	}
	if _, err := c.AppendLog(ctx, Main, pb.ID, pb.Token, []string{"started", "pass 1: 1200 frames"}); err != nil {
		return nil, err
	}
	if err := c.AttachArtifacts(ctx, Main, pb.ID, pb.Token, map[string]json.RawMessage{"preview": json.RawMessage(`{"frame":600}`)}); err != nil {
		return nil, err
	}
	g.enqueue("proc-cancel", queue.NewJob{Kind: "img.resize", Payload: json.RawMessage(`{"img":3}`)})
	g.claim("proc-cancel", queue.ClaimOptions{})
	g.cancel("proc-cancel") // processing: the cancel is requested
	g.enqueue("proc-lapse", queue.NewJob{Kind: "img.resize", Payload: json.RawMessage(`{"img":4}`)})
	g.claim("proc-lapse", queue.ClaimOptions{Visibility: 15 * time.Second})
	g.enqueue("proc-labels", queue.NewJob{Kind: "gpu.train", Payload: json.RawMessage(`{"model":"m"}`), Labels: []string{"gpu"}})
	g.claim("proc-labels", queue.ClaimOptions{Labels: []string{"gpu"}})

	// Scheduled: far ahead, and due in 15 and 18 s (small and large
	// payloads).
	g.enqueue("sched-far", queue.NewJob{Kind: "report.build", Payload: json.RawMessage(`{"day":"mon"}`), Delay: time.Hour, IdempotencyKey: "idem-sched"})
	g.enqueue("sched-soon", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":9}`), Delay: 15 * time.Second})
	g.enqueue("sched-soon-large", queue.NewJob{Kind: "report.build", Payload: large("soon"), Delay: 18 * time.Second})

	// Pending.
	g.enqueue("pending-small", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":1}`)})
	g.enqueue("pending-large", queue.NewJob{Kind: "report.build", Payload: large("pending")})
	g.enqueue("pending-labels", queue.NewJob{Kind: "gpu.train", Payload: json.RawMessage(`{"model":"n"}`), Labels: []string{"gpu", "eu"}})
	g.enqueue("pending-idem", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":3}`), IdempotencyKey: "idem-pending"})
	g.enqueue("pending-custom", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":4}`), MaxAttempts: 5,
		Backoff: &queue.Backoff{Initial: 250 * time.Millisecond, Factor: 3, Max: time.Minute, Jitter: 0.1}, Visibility: 10 * time.Second, ResultTTL: 2 * time.Hour})
	g.enqueue("pending-trace", queue.NewJob{Kind: "calc.sum", Payload: json.RawMessage(`{"a":6}`), TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if g.err != nil {
		return nil, g.err
	}

	// The reads, as this release answers them.
	ds := &Dataset{Format: 1, Release: release, Namespace: Namespace, Cases: g.cases}
	r := &ds.Reads
	r.Get = map[string]*queue.Job{}
	for name, cs := range g.cases {
		j, err := c.Get(ctx, cs.Queue, cs.ID)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			r.Get[name] = nil
		case err != nil:
			return nil, err
		default:
			r.Get[name] = j
		}
	}
	var refs []queue.JobRef
	var order []string
	for name, cs := range g.cases {
		refs = append(refs, queue.JobRef{Queue: cs.Queue, ID: cs.ID})
		order = append(order, name)
	}
	jobs, err := c.Jobs(ctx, refs)
	if err != nil {
		return nil, err
	}
	r.Jobs = map[string]*queue.Job{}
	for i, name := range order {
		r.Jobs[name] = jobs[i]
	}
	r.List, r.Stats, r.Dump = map[string]map[queue.Status][]string{}, map[string]queue.Stats{}, map[string]any{}
	r.Limits = map[string]queue.Limits{}
	for _, q := range []string{Main, Flow, Cron, Held} {
		if r.Limits[q], err = c.Limits(ctx, q); err != nil {
			return nil, err
		}
		r.List[q] = map[queue.Status][]string{}
		for _, st := range []queue.Status{queue.StatusScheduled, queue.StatusPending, queue.StatusProcessing, queue.StatusCompleted, queue.StatusDead} {
			jobs, _, err := c.List(ctx, q, queue.ListOptions{Status: st, Limit: 1000})
			if err != nil {
				return nil, err
			}
			ids := []string{}
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			r.List[q][st] = ids
		}
		if r.Stats[q], err = c.Stats(ctx, q); err != nil {
			return nil, err
		}
		if r.Dump[q], err = plumbing.Of(c).Dump(ctx, q); err != nil {
			return nil, err
		}
	}
	r.Logs, r.Artifacts = map[string]queue.LogPage{}, map[string]json.RawMessage{}
	for _, name := range []string{"proc-beat", "done-large"} {
		cs := g.cases[name]
		if r.Logs[name], err = c.Logs(ctx, cs.Queue, cs.ID, 0, 100); err != nil {
			return nil, err
		}
		if r.Artifacts[name], err = c.Artifacts(ctx, cs.Queue, cs.ID); err != nil {
			return nil, err
		}
	}
	if r.Queues, err = c.Queues(ctx); err != nil {
		return nil, err
	}
	slices.Sort(r.Queues)
	if r.Workflow, err = wf.Get(ctx, w.ID); err != nil {
		return nil, err
	}
	if r.CronEntry, err = crons.Get(ctx, entry.Name); err != nil {
		return nil, err
	}

	// Redis's clock now, as the scripts read it: at most the fake clock
	// plus the real time since the client was made.
	ds.RecordedAtUs = clock.Now().Add(time.Since(realStart)).UnixMicro() + 1
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil, err
	}
	for l := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "redis_version:"); ok {
			ds.RedisVersion = v
		}
	}
	if ds.Keys, err = dump(ctx, rdb, Namespace); err != nil {
		return nil, err
	}
	return ds, nil
}

// large is a JSON payload over the inline limit (128 bytes): it is kept
// in the data hash, not in the record.
func large(what string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"what":%q,"pad":%q}`, what, strings.Repeat("x", 200)))
}

// gen makes the cases; its first error stops it.
type gen struct {
	ctx   context.Context
	c     *queue.Client
	clock *clockwork.FakeClock
	cases map[string]*Case
	err   error
}

func (g *gen) enqueue(name string, nj queue.NewJob) {
	if g.err != nil {
		return
	}
	if nj.Queue == "" {
		nj.Queue = Main
	}
	res, err := g.c.Enqueue(g.ctx, nj)
	if err != nil {
		g.err = fmt.Errorf("gen: enqueue %s: %w", name, err)
		return
	}
	g.cases[name] = &Case{Queue: nj.Queue, ID: res.Job.ID, Idem: nj.IdempotencyKey, Labels: nj.Labels}
}

// claim claims the case's job: it must be the one the claim answers.
func (g *gen) claim(name string, o queue.ClaimOptions) {
	if g.err != nil {
		return
	}
	cs := g.cases[name]
	if o.Labels == nil {
		o.Labels = cs.Labels
	}
	jobs, err := g.c.Claim(g.ctx, cs.Queue, o)
	if err != nil {
		g.err = fmt.Errorf("gen: claim %s: %w", name, err)
		return
	}
	if len(jobs) != 1 || jobs[0].ID != cs.ID {
		g.err = fmt.Errorf("gen: claim %s: %d jobs, not its one", name, len(jobs))
		return
	}
	cs.Token = jobs[0].Token
}

func (g *gen) complete(name string, o queue.CompleteOptions) {
	if g.err != nil {
		return
	}
	cs := g.cases[name]
	if err := g.c.Complete(g.ctx, cs.Queue, cs.ID, cs.Token, o); err != nil {
		g.err = fmt.Errorf("gen: complete %s: %w", name, err)
	}
}

func (g *gen) fail(name string, o queue.FailOptions) {
	if g.err != nil {
		return
	}
	cs := g.cases[name]
	if _, err := g.c.Fail(g.ctx, cs.Queue, cs.ID, cs.Token, o); err != nil {
		g.err = fmt.Errorf("gen: fail %s: %w", name, err)
	}
}

func (g *gen) cancel(name string) {
	if g.err != nil {
		return
	}
	cs := g.cases[name]
	if _, err := g.c.Cancel(g.ctx, cs.Queue, cs.ID); err != nil {
		g.err = fmt.Errorf("gen: cancel %s: %w", name, err)
	}
}

// dump reads every key of namespace ns, sorted by name.
func dump(ctx context.Context, rdb *redis.Client, ns string) ([]Key, error) {
	names, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]Key, 0, len(names))
	for _, name := range names {
		k := Key{Key: strings.TrimPrefix(name, ns+":")}
		if k.Type, err = rdb.Type(ctx, name).Result(); err != nil {
			return nil, err
		}
		ttl, err := rdb.PTTL(ctx, name).Result()
		if err != nil {
			return nil, err
		}
		if ttl > 0 {
			k.PTTLMs = ttl.Milliseconds()
		}
		switch k.Type {
		case "string":
			s, err := rdb.Get(ctx, name).Result()
			if err != nil {
				return nil, err
			}
			b := Bytes(s)
			k.String = &b
		case "hash":
			m, err := rdb.HGetAll(ctx, name).Result()
			if err != nil {
				return nil, err
			}
			k.Hash = map[string]Bytes{}
			for f, v := range m {
				k.Hash[f] = Bytes(v)
			}
		case "list":
			l, err := rdb.LRange(ctx, name, 0, -1).Result()
			if err != nil {
				return nil, err
			}
			k.List = bytesOf(l)
		case "set":
			l, err := rdb.SMembers(ctx, name).Result()
			if err != nil {
				return nil, err
			}
			slices.Sort(l)
			k.Set = bytesOf(l)
		case "zset":
			v, err := rdb.Do(ctx, "ZRANGE", name, 0, -1, "WITHSCORES").StringSlice()
			if err != nil {
				return nil, err
			}
			k.Zset = []Member{}
			for i := 0; i+1 < len(v); i += 2 {
				k.Zset = append(k.Zset, Member{Member: Bytes(v[i]), Score: v[i+1]})
			}
		case "stream":
			if k.Stream, err = dumpStream(ctx, rdb, name); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("gen: key %s: type %s", name, k.Type)
		}
		out = append(out, k)
	}
	return out, nil
}

func dumpStream(ctx context.Context, rdb *redis.Client, name string) (*Stream, error) {
	msgs, err := rdb.Do(ctx, "XRANGE", name, "-", "+").Slice()
	if err != nil {
		return nil, err
	}
	s := &Stream{Entries: []Entry{}, Groups: []Group{}}
	for _, m := range msgs {
		e := m.([]any)
		fv := e[1].([]any)
		en := Entry{ID: e[0].(string), Fields: make([]Bytes, len(fv))}
		for i, x := range fv {
			en.Fields[i] = Bytes(x.(string))
		}
		s.Entries = append(s.Entries, en)
	}
	info, err := rdb.Do(ctx, "XINFO", "STREAM", name).Result()
	if err != nil {
		return nil, err
	}
	im, err := pairs(info)
	if err != nil {
		return nil, err
	}
	s.LastID, _ = im["last-generated-id"].(string)
	s.MaxDeletedID, _ = im["max-deleted-entry-id"].(string)
	s.EntriesAdded, _ = im["entries-added"].(int64)
	groups, err := rdb.Do(ctx, "XINFO", "GROUPS", name).Slice()
	if err != nil {
		return nil, err
	}
	for _, gr := range groups {
		gm, err := pairs(gr)
		if err != nil {
			return nil, err
		}
		g := Group{}
		g.Name, _ = gm["name"].(string)
		g.LastDeliveredID, _ = gm["last-delivered-id"].(string)
		g.EntriesRead, _ = gm["entries-read"].(int64)
		if p, _ := gm["pending"].(int64); p != 0 {
			return nil, fmt.Errorf("gen: stream %s: group %s has %d pending entries", name, g.Name, p)
		}
		s.Groups = append(s.Groups, g)
	}
	return s, nil
}

// pairs reads a RESP2 reply of alternating names and values (or a RESP3
// map) into a map.
func pairs(v any) (map[string]any, error) {
	switch x := v.(type) {
	case map[any]any:
		out := map[string]any{}
		for k, val := range x {
			out[fmt.Sprint(k)] = val
		}
		return out, nil
	case []any:
		out := map[string]any{}
		for i := 0; i+1 < len(x); i += 2 {
			out[fmt.Sprint(x[i])] = x[i+1]
		}
		return out, nil
	}
	return nil, fmt.Errorf("gen: unexpected reply %T", v)
}

func bytesOf(l []string) []Bytes {
	out := make([]Bytes, len(l))
	for i, s := range l {
		out[i] = Bytes(s)
	}
	return out
}
