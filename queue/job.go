package queue

import (
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/store"
	"math"
	"strconv"
	"strings"
	"time"
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
	// StatusWaiting: a workflow node's job waiting for its parents to end
	// (package workflow): in no list, claimed by no one, until released.
	StatusWaiting Status = "waiting"
)

// valid reports whether s is one of the statuses.
func (s Status) valid() bool {
	switch s {
	case StatusScheduled, StatusPending, StatusProcessing, StatusCompleted, StatusDead, StatusCanceled, StatusWaiting:
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
	// Attempts counts the claims since the job was enqueued or last
	// retried by hand (RunNow or RequeueDead of a dead job start it again
	// from 0, so the job gets its full MaxAttempts); MaxAttempts bounds it.
	Attempts int
	// Fence is 0 before the first claim; each claim of the job sets it
	// above every earlier claim's, and it is never reset, so a handler can
	// pass it to other systems as a fencing token. (Complete, fail and
	// heartbeat are fenced by the claim's Token.)
	Fence          int64
	MaxAttempts    int
	Backoff        Backoff
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
	// by decodeRecord).
	Token string
	// Progress is the last progress its heartbeats carried (nil: none).
	Progress *Progress
	// Artifacts are the job's artifacts, a JSON object (see
	// AttachArtifacts); read only by Get (nil when it has none), not by
	// claims and lists: read them with Client.Artifacts.
	Artifacts json.RawMessage
	// Labels are the labels a claimer must have to receive the job,
	// sorted, without duplicates; nil when it requires none.
	Labels []string
	// Workflow names the workflow node this job is (package workflow);
	// nil for any other job.
	Workflow *WorkflowRef
	// Watchers are the implicit workflows waiting for this job's end (jobs
	// enqueued with depends_on naming it; see AdoptJob), at most
	// MaxWatchers; nil for none.
	Watchers []WorkflowRef
	// Upstream is what a workflow node's job receives of its parents, set
	// when it is released: a JSON object, parent node name ->
	// {"job_id","queue","status","result","artifacts","error"}. Empty for
	// a root node and any other job.
	Upstream json.RawMessage
	// TraceParent is the W3C traceparent of the job's enqueue (the span
	// its run's span descends from or links to, see package worker);
	// empty when tracing was off then, or the enqueue had no span.
	TraceParent string
	// FlowKey is the job's flow key (NewJob.FlowKey), "" none.
	FlowKey string
}

// WorkflowRef names the workflow node a job is.
type WorkflowRef struct {
	ID   string // the workflow's id
	Node string // the node's name within it
	Gen  int64  // the retry the job was armed at (0: the first run)
}

// parseWorkflowRef reads a record's workflow field, "<id>|<node>|<gen>"
// (nil for "").
func parseWorkflowRef(s string) *WorkflowRef {
	parts := strings.Split(s, "|")
	if len(parts) != 3 {
		return nil
	}
	g, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil
	}
	return &WorkflowRef{ID: parts[0], Node: parts[1], Gen: g}
}

// parseWatchers reads a record's watchers field: refs joined by ",".
func parseWatchers(s string) []WorkflowRef {
	var out []WorkflowRef
	for _, w := range strings.Split(s, ",") {
		if r := parseWorkflowRef(w); r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// jobFromRecord builds a Job from its record, payload and result. Token is
// set; callers that must not show it clear it.
func jobFromRecord(queue, id, record, payload, result string) (*Job, error) {
	if record == "" || record[0] == '-' {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	}
	inlined, f, ok := splitRecord(record)
	if !ok {
		return nil, fmt.Errorf("queue: job %s/%s: malformed record of %d fields, want at least %d", queue, id, len(f), store.RSpec+1)
	}
	if payload == "" {
		payload = inlined
	}
	j := &Job{ID: id, Queue: queue, Kind: f[store.RKind], Status: Status(f[store.RStatus]),
		LastError: f[store.RLastError], IdempotencyKey: f[store.RIdemKey], CancelRequested: f[store.RCancelReq] == "1",
		Attempts: atoi(f[store.RAttempts]), Fence: int64(atoi(f[store.RFence])), Token: f[store.RToken]}
	if payload != "" {
		j.Payload = json.RawMessage(payload)
	}
	if result != "" {
		j.Result = json.RawMessage(result)
	}
	if err := parseSpec(f[store.RSpec], j); err != nil {
		return nil, fmt.Errorf("queue: job %s/%s: %w", queue, id, err)
	}
	j.EnqueuedAt = msTime(f[store.REnqueuedAt])
	j.ResultTTL = msDuration(f[store.RResultTTL])
	j.RunAt = msTime(f[store.RRunAt])
	j.ClaimedAt = msTime(f[store.RClaimedAt])
	j.LeaseUntil = msTime(f[store.RLeaseUntil])
	j.CompletedAt = msTime(f[store.RCompletedAt])
	j.DiedAt = msTime(f[store.RDiedAt])
	j.CanceledAt = msTime(f[store.RCanceledAt])
	j.Progress = parseProgress(f[store.RProgress])
	j.Labels = splitLabels(f[store.RLabels])
	j.Workflow = parseWorkflowRef(f[store.RWorkflow])
	j.Watchers = parseWatchers(f[store.RWatchers])
	j.TraceParent = f[store.RTrace]
	j.FlowKey = f[store.RFlow]
	return j, nil
}

// splitRecord reads a stored record (not a tombstone): its inline payload
// ("" when its payload is in the data hash) and its fields (those stored
// short spelled out: the status, run_at, attempts, fence), at least nRec
// of them (a record is stored without its trailing empty fields, and one
// written before the later fields existed has none of them); ok is false
// when it lacks even a spec.
func splitRecord(record string) (payload string, f []string, ok bool) {
	if strings.HasPrefix(record, store.RecInline) {
		p, rest, found := strings.Cut(record[len(store.RecInline):], "\x00")
		if !found {
			return "", nil, false
		}
		payload, record = p, rest
	}
	// Sized once for the full record: a stored one is short (its trailing
	// empty fields left out), and the fields past its end read empty.
	f = make([]string, 0, max(store.NRec, strings.Count(record, "\x00")+1))
	for v := range strings.SplitSeq(record, "\x00") {
		f = append(f, v)
	}
	if len(f) <= store.RSpec {
		return "", f, false
	}
	f = f[:max(len(f), store.NRec)]
	// the fields stored short (see encode in common.lua), spelled out
	if st, ok := statusOfCode[f[store.RStatus]]; ok {
		f[store.RStatus] = string(st)
	}
	switch run := f[store.RRunAt]; {
	case run == "":
		f[store.RRunAt] = f[store.REnqueuedAt]
	case run[0] == '+':
		enq, err1 := strconv.ParseInt(f[store.REnqueuedAt], 10, 64)
		d, err2 := strconv.ParseInt(run[1:], 10, 64)
		if err1 != nil || err2 != nil {
			return "", f, false
		}
		f[store.RRunAt] = strconv.FormatInt(enq+d, 10)
	}
	if f[store.RAttempts] == "" {
		f[store.RAttempts] = "0"
	}
	if f[store.RFence] == "" {
		f[store.RFence] = "0"
	}
	return payload, f, true
}

// parsePacked reads a job as the scripts answer it:
// "<id>\0<payload>\0<result>\0<upstream>\0<artifacts>\0<record>", the
// record as stored (see packed in lua/common.lua): the scripts leave its
// short forms to this side, which spells them out with jobFromRecord.
func parsePacked(queue, s string) (*Job, error) {
	var parts [5]string
	rest := s
	for i := range parts {
		var ok bool
		parts[i], rest, ok = strings.Cut(rest, "\x00")
		if !ok {
			return nil, fmt.Errorf("queue: malformed job reply %q", s)
		}
	}
	id, payload, result, upstream, arts := parts[0], parts[1], parts[2], parts[3], parts[4]
	j, err := jobFromRecord(queue, id, rest, payload, result)
	if err != nil {
		return nil, err
	}
	if upstream != "" {
		j.Upstream = json.RawMessage(upstream)
	}
	if arts != "" {
		j.Artifacts = json.RawMessage(arts)
	}
	return j, nil
}

// encodeSpec renders what a job fixes at enqueue as its "spec" field:
// "<max_attempts>|<visibility_ms>|<backoff>", the backoff as
// [Backoff.Encode] writes it (the Lua readers are in
// lua/common.lua), or specDefaultCode for specDefault.
func encodeSpec(maxAttempts int, vis time.Duration, backoff string) string {
	b := make([]byte, 0, 32+len(backoff))
	b = strconv.AppendInt(b, int64(maxAttempts), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, vis.Milliseconds(), 10)
	b = append(b, '|')
	b = append(b, backoff...)
	if string(b) == store.SpecDefault {
		return store.SpecDefaultCode
	}
	return string(b)
}

// parseSpec sets j's fields from a spec written by encodeSpec.
func parseSpec(spec string, j *Job) error {
	if spec == store.SpecDefaultCode {
		spec = store.SpecDefault
	}
	ma, rest, ok1 := strings.Cut(spec, "|")
	vis, bo, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 {
		return fmt.Errorf("malformed spec %q: want max_attempts|visibility_ms|backoff", spec)
	}
	backoff, err := decodeBackoff(bo)
	if err != nil {
		return err
	}
	j.MaxAttempts = atoi(ma)
	j.Visibility = msDuration(vis)
	j.Backoff = backoff
	return nil
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

// scoreOf is t as a score of a scheduled set: Unix milliseconds with
// three decimals, rounded up to the microsecond. (A job's run_at_ms is
// the whole millisecond; the schedule keeps microseconds, so that a retry
// asked for 100 ms after a failure is not due up to a millisecond late.
// A double holds such a score exactly until the year 2255.)
func scoreOf(t time.Time) string {
	return usScore(ceilMicro(t).UnixMicro())
}

// delayWhen is a script's "when" of a delay d after Redis's now,
// "d<µs>", d rounded up to the microsecond (never under what was asked).
func delayWhen(d time.Duration) string {
	return "d" + strconv.FormatInt(int64((d+time.Microsecond-1)/time.Microsecond), 10)
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

// statusOfCode maps each stored status code (store.StatusCodes) to its
// status.
var statusOfCode = func() map[string]Status {
	m := map[string]Status{}
	for _, c := range store.StatusCodes {
		m[c.Code] = Status(c.Status)
	}
	return m
}()
