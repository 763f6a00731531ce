package queue

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/delayed"
)

// Status is where a job is in its life.
type Status string

// The statuses of a job.
const (
	StatusScheduled  Status = "scheduled"  // waiting for its run-at time
	StatusPending    Status = "pending"    // due, waiting for a worker
	StatusProcessing Status = "processing" // claimed by a worker under a lease
	StatusCompleted  Status = "completed"  // done; kept for its retention
	StatusDead       Status = "dead"       // attempts spent, or failed for good
	StatusCanceled   Status = "canceled"   // canceled before it ran
)

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusScheduled, StatusPending, StatusProcessing, StatusCompleted, StatusDead, StatusCanceled:
		return true
	}
	return false
}

// Job is a job as stored. Times are zero when they have not happened.
type Job struct {
	ID      string
	Queue   string
	Kind    string
	Payload json.RawMessage
	Status  Status
	// Attempts counts claims. It grows with each claim; requeueing a dead
	// job (RunNow, RequeueDead) starts it again from 0 so the job gets its
	// full MaxAttempts. Claims are fenced by their token, not by Attempts.
	Attempts       int
	MaxAttempts    int
	Backoff        delayed.Backoff
	Visibility     time.Duration // lease length of a claim
	ResultTTL      time.Duration // how long the finished job is kept
	EnqueuedAt     time.Time
	RunAt          time.Time
	ClaimedAt      time.Time
	LeaseUntil     time.Time
	CompletedAt    time.Time
	DiedAt         time.Time
	CanceledAt     time.Time
	Result         json.RawMessage
	LastError      string
	IdempotencyKey string
	// CancelRequested is set on a processing job whose cancellation was
	// asked for; its worker sees it on its next heartbeat.
	CancelRequested bool
	// Token is the claim token; set only on jobs returned by a claim (and
	// by DecodeJobHash).
	Token string
}

// Hash fields of a job. The Lua scripts use the same names.
const (
	fKind        = "kind"
	fPayload     = "payload"
	fStatus      = "status"
	fAttempts    = "attempts" // absent until the first claim
	fSpec        = "spec"     // see encodeSpec
	fResultTTL   = "result_ttl_ms"
	fRunAt       = "run_at_ms"
	fClaimedAt   = "claimed_at_ms"
	fLeaseUntil  = "lease_until_ms"
	fCompletedAt = "completed_at_ms"
	fDiedAt      = "died_at_ms"
	fCanceledAt  = "canceled_at_ms"
	fResult      = "result"
	fLastError   = "last_error"
	fIdemKey     = "idempotency_key"
	fToken       = "claim_token"
	fCancelReq   = "cancel_requested"
)

// DecodeJobHash decodes a job's hash, <ns>:{<queue>}:job:<id>, as HGETALL
// reads it, for tools that read Redis directly (the chaos battery's
// checker does). The layout is this version's and may change with the
// next: this is the one place that reads it. An empty hash is ErrNotFound.
// Unlike Get, it sets Token: the job's last claim token.
func DecodeJobHash(queue, id string, fields map[string]string) (*Job, error) {
	j, err := jobFromHash(queue, id, fields)
	if err != nil {
		return nil, err
	}
	j.Token = fields[fToken]
	return j, nil
}

// jobFromHash builds a Job from its hash fields (as a map or a flat
// field/value list from a script).
func jobFromHash(queue, id string, h map[string]string) (*Job, error) {
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	}
	j := &Job{ID: id, Queue: queue, Kind: h[fKind], Status: Status(h[fStatus]),
		LastError: h[fLastError], IdempotencyKey: h[fIdemKey], CancelRequested: h[fCancelReq] == "1"}
	if p := h[fPayload]; p != "" {
		j.Payload = json.RawMessage(p)
	}
	if r := h[fResult]; r != "" {
		j.Result = json.RawMessage(r)
	}
	j.Attempts = atoi(h[fAttempts])
	if err := parseSpec(h[fSpec], j); err != nil {
		return nil, fmt.Errorf("queue: job %s/%s: %w", queue, id, err)
	}
	j.ResultTTL = msDuration(h[fResultTTL])
	j.RunAt = msTime(h[fRunAt])
	j.ClaimedAt = msTime(h[fClaimedAt])
	j.LeaseUntil = msTime(h[fLeaseUntil])
	j.CompletedAt = msTime(h[fCompletedAt])
	j.DiedAt = msTime(h[fDiedAt])
	j.CanceledAt = msTime(h[fCanceledAt])
	return j, nil
}

// encodeSpec renders what a job fixes at enqueue as its "spec" field:
// "<max_attempts>|<visibility_ms>|<enqueued_at_ms>|<backoff>", the backoff
// as [delayed.Backoff.Encode] writes it. One field rather than four keeps
// the hash Redis writes per job small (the Lua readers are in
// lua/common.lua).
func encodeSpec(maxAttempts int, vis time.Duration, enqueuedAt time.Time, backoff string) string {
	b := make([]byte, 0, 32+len(backoff))
	b = strconv.AppendInt(b, int64(maxAttempts), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, vis.Milliseconds(), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, enqueuedAt.UnixMilli(), 10)
	b = append(b, '|')
	b = append(b, backoff...)
	return string(b)
}

// parseSpec sets j's fields from a spec written by encodeSpec.
func parseSpec(spec string, j *Job) error {
	ma, rest, ok1 := strings.Cut(spec, "|")
	vis, rest, ok2 := strings.Cut(rest, "|")
	enq, bo, ok3 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("malformed spec %q: want max_attempts|visibility_ms|enqueued_at_ms|backoff", spec)
	}
	backoff, err := delayed.DecodeBackoff(bo)
	if err != nil {
		return err
	}
	j.MaxAttempts = atoi(ma)
	j.Visibility = msDuration(vis)
	j.EnqueuedAt = msTime(enq)
	j.Backoff = backoff
	return nil
}

// flatToMap turns a script's HGETALL reply into a map.
func flatToMap(v any) map[string]string {
	xs, _ := v.([]any)
	m := make(map[string]string, len(xs)/2)
	for i := 0; i+1 < len(xs); i += 2 {
		k, _ := xs[i].(string)
		val, _ := xs[i+1].(string)
		m[k] = val
	}
	return m
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func msTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func msDuration(s string) time.Duration {
	ms, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(ms) * time.Millisecond
}

// dueAt is how a job asked for at runAt is stored, at now: later when it
// is not due yet; the score of the schedule (runAt to the microsecond,
// rounded up, so the job never runs before it asked; now's millisecond
// when due already); and the run_at the job shows, the millisecond its due
// time falls in, as every time of a job is (so a claim's claimed_at is
// never before it).
func dueAt(runAt, now time.Time) (shown time.Time, score string, later bool) {
	if !runAt.After(now) {
		ms := now.UnixMilli()
		return time.UnixMilli(ms).UTC(), strconv.FormatInt(ms, 10), false
	}
	return time.UnixMilli(runAt.UnixMilli()).UTC(), scoreOf(runAt), true
}

// scoreOf is t as a score of a scheduled set: Unix milliseconds with
// three decimals, rounded up to the microsecond. (A job's run_at_ms is
// the whole millisecond; the schedule keeps microseconds, so that a retry
// asked for 100 ms after a failure is not due up to a millisecond late.
// A double holds such a score exactly until the year 2255.)
func scoreOf(t time.Time) string {
	return usScore(ceilMicro(t).UnixMicro())
}

// ceilMicro is t rounded up to the microsecond, as the schedule keeps it.
func ceilMicro(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); c.Before(t) {
		return c.Add(time.Microsecond)
	}
	return t
}

// usScore writes us, Unix microseconds, as a score: milliseconds with
// three decimals (0 for times before 1970).
func usScore(us int64) string {
	if us < 0 {
		return "0"
	}
	b := strconv.AppendInt(make([]byte, 0, 24), us/1000, 10)
	frac := us % 1000
	return string(append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10)))
}

// timeOfScore is the time of a scheduled set's score.
func timeOfScore(score float64) time.Time {
	return time.UnixMicro(int64(math.Round(score * 1000))).UTC()
}

// nextOfReply reads a script's next due score ("" for none) as a time.
func nextOfReply(v any) (time.Time, error) {
	head, _ := v.(string)
	if head == "" {
		return time.Time{}, nil
	}
	f, err := strconv.ParseFloat(head, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due score %q: %w", head, err)
	}
	return timeOfScore(f), nil
}

// cutoffOf is now as the highest score that is due: Unix milliseconds with
// the microseconds, rounded down.
func cutoffOf(now time.Time) string {
	return usScore(now.UnixMicro())
}
