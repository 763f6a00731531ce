package wire

import (
	"encoding/json"
	"github.com/chronoq/chronoq/internal/names"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
)

// The Job resource is written by hand rather than through encoding/json:
// it is the answer to every produce and claim, up to a thousand at a time,
// and reflection would be the largest cost of the HTTP path. The tests hold the
// output to the resource of docs/API.md field by field, and the fuzz tests
// check it is valid JSON.

// AppendJob appends j as the Job resource; with its claim token when
// withToken.
func AppendJob(b []byte, j *queue.Job, withToken bool) []byte {
	b = append(b, `{"id":`...)
	b = AppendString(b, j.ID)
	b = append(b, `,"queue":`...)
	b = AppendString(b, j.Queue)
	b = append(b, `,"kind":`...)
	b = AppendString(b, JobKind(j))
	b = append(b, `,"payload":`...)
	if len(j.Payload) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, j.Payload...) // valid JSON: checked at enqueue
	}
	b = append(b, `,"status":`...)
	b = AppendString(b, string(j.Status))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(j.Attempts), 10)
	b = append(b, `,"fence":`...)
	b = strconv.AppendInt(b, j.Fence, 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"backoff":{"initial":`...)
	b = AppendString(b, Duration(j.Backoff.Initial))
	b = append(b, `,"factor":`...)
	b = AppendFloat(b, j.Backoff.Factor)
	b = append(b, `,"max":`...)
	b = AppendString(b, Duration(j.Backoff.Max))
	b = append(b, `,"jitter":`...)
	b = AppendFloat(b, j.Backoff.Jitter)
	b = append(b, `},"visibility":`...)
	b = AppendString(b, Duration(j.Visibility))
	b = append(b, `,"enqueued_at":`...)
	b = AppendTime(b, j.EnqueuedAt)
	b = append(b, `,"run_at":`...)
	b = AppendTime(b, j.RunAt)
	b = append(b, `,"claimed_at":`...)
	b = AppendTime(b, j.ClaimedAt)
	b = append(b, `,"lease_until":`...)
	b = AppendTime(b, j.LeaseUntil)
	b = append(b, `,"completed_at":`...)
	b = AppendTime(b, j.CompletedAt)
	b = append(b, `,"result":`...)
	if len(j.Result) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, j.Result...) // valid JSON: checked at completion
	}
	b = append(b, `,"last_error":`...)
	b = AppendNullString(b, j.LastError)
	b = append(b, `,"idempotency_key":`...)
	b = AppendNullString(b, j.IdempotencyKey)
	b = append(b, `,"labels":[`...)
	for i, l := range j.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, l)
	}
	b = append(b, ']')
	if j.FlowKey != "" {
		b = append(b, `,"flow_key":`...)
		b = AppendString(b, j.FlowKey)
	}
	b = appendWorkflowFields(b, j)
	if withToken {
		b = append(b, `,"token":`...)
		b = AppendString(b, j.Token)
	}
	// Present only when the job has them: its progress, and its artifacts
	// (read with one job only, see queue.Job.Artifacts).
	if j.Progress != nil {
		b = append(b, `,"progress":`...)
		b = appendProgress(b, j.Progress)
	}
	if len(j.Artifacts) > 0 {
		b = append(b, `,"artifacts":`...)
		b = append(b, j.Artifacts...) // a JSON object: written by the queue package
	}
	// and the trace context of its enqueue, when it was traced
	if j.TraceParent != "" {
		b = append(b, `,"traceparent":`...)
		b = AppendString(b, j.TraceParent)
	}
	return append(b, '}')
}

// MarkDebounced adds "debounced":true to the Job resource that ends b
// (AppendJob's): the answer to an enqueue folded into its flow key's
// waiting debounced job (queue.Enqueued.Debounced).
func MarkDebounced(b []byte) []byte {
	return append(b[:len(b)-1], `,"debounced":true}`...)
}

// appendProgress appends p as {"percent","message","updated_at"}.
func appendProgress(b []byte, p *queue.Progress) []byte {
	b = append(b, `{"percent":`...)
	b = AppendFloat(b, p.Percent)
	b = append(b, `,"message":`...)
	b = AppendString(b, p.Message)
	b = append(b, `,"updated_at":`...)
	b = AppendTime(b, p.UpdatedAt)
	return append(b, '}')
}

// AppendJobs appends {"jobs":[...]} without its closing brace, so that a
// caller can add fields.
func AppendJobs(b []byte, jobs []*queue.Job, withToken bool) []byte {
	b = append(b, `{"jobs":[`...)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJob(b, j, withToken)
	}
	return append(b, ']')
}

// AppendTime appends t as a JSON string in [TimeLayout], or null for the
// zero time.
func AppendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

// AppendNullString appends s as a JSON string, or null when empty.
func AppendNullString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendString(b, s)
}

// AppendFloat writes f as encoding/json does (finite values only: a
// backoff's factor and jitter are validated).
func AppendFloat(b []byte, f float64) []byte {
	if f != f || f > 1e308 || f < -1e308 {
		return append(b, '0')
	}
	abs := f
	if abs < 0 {
		abs = -abs
	}
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1] // e-07 -> e-7, as encoding/json writes it
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json does
// (HTML characters, U+2028 and U+2029 included; invalid UTF-8 becomes
// U+FFFD).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendWorkflowFields appends a workflow node's job's fields to the Job
// resource: "workflow" and, once released, "upstream".
func appendWorkflowFields(b []byte, j *queue.Job) []byte {
	if j.Workflow == nil {
		return b
	}
	b = append(b, `,"workflow":{"id":`...)
	b = AppendString(b, j.Workflow.ID)
	b = append(b, `,"node":`...)
	b = AppendString(b, j.Workflow.Node)
	b = append(b, '}')
	if len(j.Upstream) > 0 {
		b = append(b, `,"upstream":`...)
		b = append(b, j.Upstream...) // JSON built by the releaser
	}
	return b
}

// TimeLayout is how the API writes times: RFC 3339, milliseconds, UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is t as the API writes it, or nil (JSON null) for the zero time.
func Time(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(TimeLayout)
	return &s
}

// Duration is d as a Go duration string without the zero units Go
// appends: "1h" for 1h0m0s, "5m" for 5m0s.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// JobKind is the kind a job is shown with: a push job (stored as kind
// dispatch.EnvelopeKind, its options and the kind it was given in an
// envelope payload) shows the kind it was given, so that lists and the
// dashboard read the user's kinds; any other job its own.
func JobKind(j *queue.Job) string {
	if j.Kind != dispatch.EnvelopeKind {
		return j.Kind
	}
	var env struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(j.Payload, &env) != nil || names.ValidateKind(env.Kind) != nil {
		return j.Kind
	}
	return env.Kind
}
