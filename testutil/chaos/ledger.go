package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ledger is a second redis-server, never faulted, where every process
// of a run writes what it saw: the producer each enqueue it tried and each
// one Redis acknowledged, the workers each execution (start and end) and
// each outcome the store gave, the orchestrator each fault it injected. The
// checker counts from it and from the queue's Redis at the end.

// Attempt is one enqueue the producer tried; Seq is in the job's payload,
// so a job whose reply was lost can still be told apart.
type Attempt struct {
	Seq     int64  `json:"seq"`
	Queue   string `json:"q"`
	Poison  bool   `json:"poison,omitempty"`
	DelayMs int64  `json:"delay,omitempty"`
	T       int64  `json:"t"`
}

// Ack is an enqueue that returned no error: the promise to keep.
type Ack struct {
	Seq   int64  `json:"seq"`
	ID    string `json:"id"`
	Queue string `json:"q"`
	// Due is the job's run_at as enqueue answered it (Redis's clock, to
	// the ms), unix ns; for the report's examples (see Report.Early).
	Due int64 `json:"due,omitempty"`
	T   int64 `json:"t"`
}

// Exec is the start or the end of one run of a handler.
type Exec struct {
	Ev      string `json:"ev"` // "start" or "end"
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	Queue   string `json:"q"`
	Attempt int    `json:"att"`
	Token   string `json:"tok"`
	Slot    string `json:"slot"`
	Pid     int    `json:"pid"`
	Claimed int64  `json:"claimed"` // when the claim was made (the job's claimed_at, Redis's clock), unix ns
	Due     int64  `json:"due"`     // the job's run_at at the claim (Redis's clock), unix ns
	T       int64  `json:"t"`
	Err     string `json:"err,omitempty"` // the handler's error, on "end"
	// Node is the job's workflow node name ("" for any other job), and Up
	// the parents its upstream names (sorted): what it was released with.
	Node string   `json:"node,omitempty"`
	Up   []string `json:"up,omitempty"`
	// Flow is the job's flow key ("" none).
	Flow string `json:"flow,omitempty"`
}

// Outcome is what the store made of one run (worker.Outcome).
type Outcome struct {
	ID     string `json:"id"`
	Token  string `json:"tok"`
	Slot   string `json:"slot"`
	Status string `json:"status,omitempty"` // empty: the store took no change
	Store  string `json:"store,omitempty"`  // class of the store's error
	Msg    string `json:"msg,omitempty"`
	// HandedBack: the worker stopped and released the job (worker.ErrStopped).
	HandedBack bool  `json:"handed,omitempty"`
	T          int64 `json:"t"`
}

// Fault is one injected fault and its time window, or a stall the battery
// observed (FaultStall: a worker's timers ran late; FaultRedisStall: Redis's
// latency monitor saw a slow event) without causing it.
type Fault struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"` // a worker slot, a proxy's process, a node; empty: global
	Pid    int    `json:"pid,omitempty"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Note   string `json:"note,omitempty"`
}

// The kinds of Fault.
const (
	// Injected on one worker slot.
	FaultWorkerKill = "worker-kill" // SIGKILL, then a new process
	FaultWorkerStop = "worker-stop" // SIGSTOP past the visibility, then SIGCONT
	FaultServeKill  = "serve-kill"  // SIGKILL a chronoq serve (promoter, reclaimer, workflow releaser), then a new process
	// Injected on one process's connections (its proxy).
	FaultProxyDrop     = "proxy-drop"     // one reply dropped with its connection
	FaultProxyBlackout = "proxy-blackout" // every reply dropped for a while
	// Injected on everyone.
	FaultRedisKill     = "redis-kill"     // SIGKILL redis-server, restart it
	FaultMasterRestart = "master-restart" // SIGKILL a cluster master, restart it
	FaultFailover      = "failover"       // CLUSTER FAILOVER
	FaultScriptFlush   = "script-flush"   // SCRIPT FLUSH on every node
	FaultSlotMigration = "slot-migration" // a queue's slot moved to another master, by hand and slowly
	// Observed, not injected.
	FaultStall      = "stall"       // a worker's timers ran late
	FaultRedisStall = "redis-stall" // Redis's latency monitor saw a slow event
)

// Ledger writes and reads one run's records under a key prefix.
type Ledger struct {
	rdb *redis.Client
	p   string
}

// OpenLedger connects to the ledger's redis-server.
func OpenLedger(addr, prefix string) *Ledger {
	return &Ledger{rdb: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32, MaxRetries: 5}), p: prefix}
}

// Close closes the connection.
func (l *Ledger) Close() error { return l.rdb.Close() }

func (l *Ledger) key(name string) string { return l.p + ":" + name }

// write runs fn until it succeeds, a few times: the ledger is never
// faulted, so a failure here is the harness's, and fatal to the run.
func (l *Ledger) write(fn func(ctx context.Context) error) error {
	var err error
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(time.Duration(i+1) * 100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: ledger write: %w", err)
}

func (l *Ledger) push(name string, v any) error {
	b, _ := json.Marshal(v)
	return l.write(func(ctx context.Context) error { return l.rdb.RPush(ctx, l.key(name), b).Err() })
}

// hset stores v under its sequence number in the hash name.
func (l *Ledger) hset(name string, seq int64, v any) error {
	b, _ := json.Marshal(v)
	return l.write(func(ctx context.Context) error {
		return l.rdb.HSet(ctx, l.key(name), strconv.FormatInt(seq, 10), b).Err()
	})
}

// RecordAttempt records an enqueue about to be tried.
func (l *Ledger) RecordAttempt(a Attempt) error { return l.hset("att", a.Seq, a) }

// RecordAck records an acknowledged enqueue.
func (l *Ledger) RecordAck(a Ack) error { return l.hset("ack", a.Seq, a) }

// RecordExec records the start or end of a run.
func (l *Ledger) RecordExec(e Exec) error { return l.push("exec", e) }

// RecordOutcome records what the store made of a run.
func (l *Ledger) RecordOutcome(o Outcome) error { return l.push("out", o) }

// RecordFault records an injected fault.
func (l *Ledger) RecordFault(f Fault) error { return l.push("fault", f) }

// CountError counts an error seen by role (worker, producer) by class, and
// keeps a few samples of each class.
// (Two writes, each retried on its own: a retry of the sample must not
// count the error again.)
func (l *Ledger) CountError(role, class, msg string) error {
	var n int64
	if err := l.write(func(ctx context.Context) (err error) {
		n, err = l.rdb.HIncrBy(ctx, l.key("errs:"+role), class, 1).Result()
		return err
	}); err != nil || n > 3 {
		return err
	}
	return l.write(func(ctx context.Context) error {
		return l.rdb.RPush(ctx, l.key("errsample"), role+" "+class+": "+msg).Err()
	})
}

// Records is everything in a run's ledger.
type Records struct {
	Attempts map[int64]Attempt
	Acks     map[int64]Ack
	Execs    []Exec
	Outcomes []Outcome
	Faults   []Fault
	Errors   map[string]map[string]int64 // role -> class -> count
	Samples  []string
}

// Roles whose errors are counted.
var errorRoles = []string{"worker", "producer"}

// Load reads the whole ledger of the run.
func (l *Ledger) Load(ctx context.Context) (*Records, error) {
	r := &Records{Attempts: map[int64]Attempt{}, Acks: map[int64]Ack{}, Errors: map[string]map[string]int64{}}
	if err := loadHash(ctx, l, "att", r.Attempts); err != nil {
		return nil, err
	}
	if err := loadHash(ctx, l, "ack", r.Acks); err != nil {
		return nil, err
	}
	if err := loadList(ctx, l, "exec", &r.Execs); err != nil {
		return nil, err
	}
	if err := loadList(ctx, l, "out", &r.Outcomes); err != nil {
		return nil, err
	}
	if err := loadList(ctx, l, "fault", &r.Faults); err != nil {
		return nil, err
	}
	for _, role := range errorRoles {
		m, err := l.rdb.HGetAll(ctx, l.key("errs:"+role)).Result()
		if err != nil {
			return nil, err
		}
		r.Errors[role] = map[string]int64{}
		for k, v := range m {
			n, _ := strconv.ParseInt(v, 10, 64)
			r.Errors[role][k] = n
		}
	}
	var err error
	if r.Samples, err = l.rdb.LRange(ctx, l.key("errsample"), 0, 200).Result(); err != nil {
		return nil, err
	}
	return r, nil
}

// loadHash reads a hash written by hset into out, by sequence number.
func loadHash[T any](ctx context.Context, l *Ledger, name string, out map[int64]T) error {
	m, err := l.rdb.HGetAll(ctx, l.key(name)).Result()
	if err != nil {
		return err
	}
	for k, v := range m {
		var x T
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return err
		}
		seq, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return fmt.Errorf("chaos: ledger %s: field %q is not a sequence number", name, k)
		}
		out[seq] = x
	}
	return nil
}

func loadList[T any](ctx context.Context, l *Ledger, name string, out *[]T) error {
	const chunk = 5000
	for start := int64(0); ; start += chunk {
		vs, err := l.rdb.LRange(ctx, l.key(name), start, start+chunk-1).Result()
		if err != nil {
			return err
		}
		for _, v := range vs {
			var x T
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return err
			}
			*out = append(*out, x)
		}
		if len(vs) < chunk {
			return nil
		}
	}
}

// Len answers the number of entries of a record kind: "ack", "att" (hashes)
// or "exec", "out", "fault" (lists).
func (l *Ledger) Len(ctx context.Context, name string) (int64, error) {
	switch name {
	case "ack", "att":
		return l.rdb.HLen(ctx, l.key(name)).Result()
	}
	return l.rdb.LLen(ctx, l.key(name)).Result()
}
