package queue

import (
	"context"
	"github.com/chronoq/chronoq/internal/store"
	"math"
	"strconv"
	"strings"
	"time"
)

// RunScript runs one of the package's scripts by name on queue's keys,
// with the common arguments and then args, for tests that call a script
// twice as a retried command would.
func (c *Client) RunScript(ctx context.Context, name, queue string, args ...any) (any, error) {
	k := store.QueueKeys(c.ns, queue)
	var extra []string
	lsets := ""
	if store.TakesSets(name) && name != "enqueue" {
		if v, err := c.setsOf(ctx, k); err == nil {
			extra, lsets = v.keys, v.ids
		}
	}
	v, err := c.eng.RunRaw(ctx, name, k, extra, c.common(k, lsets), args...)
	if err != nil {
		return nil, err
	}
	v, m, err := store.UnwrapMarks(name, v)
	c.mark(ctx, k.Name, m)
	return v, err
}

// ForgetIdle exposes forgetIdle, the reclaim sweep's last step.
func (c *Client) ForgetIdle(ctx context.Context, queue string) (bool, error) {
	return c.forgetIdle(ctx, queue)
}

// ParsePacked exposes parsePacked: a job as a script answers it.
var ParsePacked = parsePacked

// EncodeSpec exposes encodeSpec, for tests that seed jobs directly.
var EncodeSpec = encodeSpec

// QueueKey is the key of queue called name (see layout.go), for tests that
// look at Redis directly.
func QueueKey(ns, queue, name string) string { return store.QueueKeys(ns, queue).ByName(name) }

// Key names, for QueueKey.
const (
	KeyMeta    = store.KeyMeta
	KeyJobs    = store.KeyJobs
	KeyData    = store.KeyData
	KeySched   = store.KeySched
	KeyPending = store.KeyPending
	KeyLeases  = store.KeyLeases
	KeyDead    = store.KeyDead
	KeyDone    = store.KeyDone
	KeyIdem    = store.KeyIdem
	KeyExpiry  = store.KeyExpiry
	KeyClaims  = store.KeyClaims
	KeyWake    = store.KeyWake
)

// DeadRecord is the record of a dead job as the scripts write it, for
// tests that seed many dead jobs at once.
func DeadRecord(kind string, attempts int, spec string, runAtMs, diedAtMs int64) string {
	f := make([]string, store.NRec)
	f[store.RStatus], f[store.RKind], f[store.RSpec] = string(StatusDead), kind, spec
	f[store.REnqueuedAt], f[store.RRunAt], f[store.RDiedAt] = strconv.FormatInt(runAtMs, 10), strconv.FormatInt(runAtMs, 10), strconv.FormatInt(diedAtMs, 10)
	f[store.RAttempts], f[store.RFence], f[store.RLastError] = strconv.Itoa(attempts), strconv.Itoa(attempts), "boom"
	return strings.Join(f, "\x00")
}

// Index reads one attention index ("due" or "sweep"): queue -> ms.
func (c *Client) Index(ctx context.Context, name string) (map[string]int64, error) {
	a := store.AttentionKeys(c.ns)
	key := map[string]string{"due": a.Due, "sweep": a.Sweep}[name]
	zs, err := c.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member.(string)] = int64(z.Score)
	}
	return out, nil
}

// Unindex takes queue out of the attention indexes, as a client that died
// before its mark leaves it.
func (c *Client) Unindex(ctx context.Context, queue string) error { return c.unmark(ctx, queue) }

// MarkScriptHash is the SHA-1 of the script that applies marks, for tests
// that count the marks a client sends.
func MarkScriptHash() string { return store.ScriptHashes()["mark"] }

// SweepHintFor exposes store.SweepHintFor.
const SweepHintFor = store.SweepHintFor

// ParkDue exposes park on the due index.
func (c *Client) ParkDue(ctx context.Context, queue string, atMs, seq int64) error {
	a := store.AttentionKeys(c.ns)
	return c.park(ctx, a.Due, a.DueSeq, queue, atMs, seq)
}

// SweepDue exposes sweepDue: the queues a sweep would visit now.
func (c *Client) SweepDue(ctx context.Context) ([]string, error) {
	ds, err := c.sweepDue(ctx, sweepBatch)
	var qs []string
	for _, d := range ds {
		qs = append(qs, d.Queue)
	}
	return qs, err
}

// SweepPlan exposes sweepPlan, a reconcile's reading of every queue.
func (c *Client) SweepPlan(ctx context.Context, qs []string) (work, empty []string, err error) {
	return c.sweepPlan(ctx, qs)
}

// CoalesceWaiting is how many Enqueue calls into queue wait for the one in
// flight (see coalesce.go).
func (c *Client) CoalesceWaiting(queue string) int { return c.enqueues.Waiting(queue) }

// EnqueueTwice enqueues nj, calls between, and sends the same script call
// again, as go-redis does after a lost reply; it answers both replies.
func (c *Client) EnqueueTwice(ctx context.Context, nj NewJob, between func()) (first, second Enqueued, err error) {
	p, err := c.prepare(nj, c.clock.Now(), 0)
	if err != nil {
		return first, second, err
	}
	if err := c.register(ctx, p.job.Queue); err != nil {
		return first, second, err
	}
	out := make([]Enqueued, 1)
	if err := c.enqueueQueue(ctx, p.job.Queue, []prepared{p}, []int{0}, out); err != nil {
		return first, second, err
	}
	first = out[0]
	between()
	if err := c.enqueueQueue(ctx, p.job.Queue, []prepared{p}, []int{0}, out); err != nil {
		return first, second, err
	}
	return first, out[0], nil
}

// Uncertain exposes uncertain: a script of queue failed with err.
func (c *Client) Uncertain(queue string, err error) { c.uncertain(queue, err) }

// MarksPending is how many queues' marks wait for remarkLoop.
func (c *Client) MarksPending() int {
	c.remarkMu.Lock()
	defer c.remarkMu.Unlock()
	return len(c.remark)
}

// SetWakeChunk sets how long one wait on the wake stream lasts at most,
// before the client is used (under blockingReadTimeout).
func (c *Client) SetWakeChunk(d time.Duration) { c.wakeChunk = d }

// NRecFirst is the length of the first version's record (up to its ack
// field), for tests of records written before later fields.
const NRecFirst = store.RAck + 1

// NRec is the length of this version's record.
const NRec = store.NRec

// Compact records, for the tests of the stored form.
const (
	RecInline        = store.RecInline
	InlinePayloadMax = store.InlinePayloadMax
	SpecDefaultCode  = store.SpecDefaultCode
)

// SpelledRecord answers a stored record's fields in the long form
// (nRec fields, every one spelled out, the default
// spec too), and its inline payload ("" when it has none), for tests that
// write records of that form.
func SpelledRecord(rec string) (fields []string, payload string) {
	p, f, _ := splitRecord(rec)
	if f[store.RSpec] == store.SpecDefaultCode {
		f[store.RSpec] = store.SpecDefault
	}
	return f, p
}

// EndLinger is how long a queue's channel stays subscribed after its last
// waiter for a job's end left.
const EndLinger = endLinger

// Bounds are the least and the greatest delay Delay can give for
// attempt.
func (b Backoff) Bounds(attempt int) (lo, hi time.Duration) {
	return b.Delay(attempt, 0), b.Delay(attempt, math.Nextafter(1, 0))
}

// Encode is b's stored form.
func (b Backoff) Encode() string { return b.encode() }

// The decoders of stored forms, for the tests of the queue_test package.
var (
	DecodeBackoff = decodeBackoff
	DecodeRecord  = decodeRecord
	ParseEvent    = parseEvent
)

// Delay, the reference of the fail script's backoff, is the wait after
// failed attempt number attempt (1 for the first),
// for a uniform random r in [0, 1). It is truncated to whole milliseconds,
// the resolution of scheduled times.
func (b Backoff) Delay(attempt int, r float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	initial, maxMs := float64(b.Initial.Milliseconds()), float64(b.Max.Milliseconds())
	d := math.Min(initial*math.Pow(b.Factor, float64(attempt-1)), maxMs)
	d = math.Min(d*(1+b.Jitter*(2*r-1)), maxMs)
	return time.Duration(math.Floor(d)) * time.Millisecond
}

// UseExactClock makes Redis's clock read as the test's clock itself
// (store.Exact), not as it plus the real time gone by (store.Running):
// for tests of windows shorter than a test's run.
func (c *Client) UseExactClock() { c.timeMode = store.Exact }
