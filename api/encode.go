package api

import (
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
)

// The Job resource is written by hand rather than through encoding/json:
// it is the answer to every produce and claim, up to a thousand at a time,
// and reflection was the largest cost of the HTTP path. The tests hold the
// output to the resource of docs/API.md field by field, and the fuzz tests
// check it is valid JSON.

// appendJob appends j as the Job resource; with its claim token when
// withToken.
func appendJob(b []byte, j *queue.Job, withToken bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"queue":`...)
	b = appendString(b, j.Queue)
	b = append(b, `,"kind":`...)
	b = appendString(b, jobKind(j))
	b = append(b, `,"payload":`...)
	if len(j.Payload) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, j.Payload...) // valid JSON: checked at enqueue
	}
	b = append(b, `,"status":`...)
	b = appendString(b, string(j.Status))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(j.Attempts), 10)
	b = append(b, `,"fence":`...)
	b = strconv.AppendInt(b, j.Fence, 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"backoff":{"initial":`...)
	b = appendString(b, fmtDuration(j.Backoff.Initial))
	b = append(b, `,"factor":`...)
	b = appendFloat(b, j.Backoff.Factor)
	b = append(b, `,"max":`...)
	b = appendString(b, fmtDuration(j.Backoff.Max))
	b = append(b, `,"jitter":`...)
	b = appendFloat(b, j.Backoff.Jitter)
	b = append(b, `},"visibility":`...)
	b = appendString(b, fmtDuration(j.Visibility))
	b = append(b, `,"enqueued_at":`...)
	b = appendTime(b, j.EnqueuedAt)
	b = append(b, `,"run_at":`...)
	b = appendTime(b, j.RunAt)
	b = append(b, `,"claimed_at":`...)
	b = appendTime(b, j.ClaimedAt)
	b = append(b, `,"lease_until":`...)
	b = appendTime(b, j.LeaseUntil)
	b = append(b, `,"completed_at":`...)
	b = appendTime(b, j.CompletedAt)
	b = append(b, `,"result":`...)
	if len(j.Result) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, j.Result...) // valid JSON: checked at completion
	}
	b = append(b, `,"last_error":`...)
	b = appendNullString(b, j.LastError)
	b = append(b, `,"idempotency_key":`...)
	b = appendNullString(b, j.IdempotencyKey)
	b = append(b, `,"labels":[`...)
	for i, l := range j.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, l)
	}
	b = append(b, ']')
	b = appendWorkflowFields(b, j)
	if withToken {
		b = append(b, `,"token":`...)
		b = appendString(b, j.Token)
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
	return append(b, '}')
}

// appendProgress appends p as {"percent","message","updated_at"}.
func appendProgress(b []byte, p *queue.Progress) []byte {
	b = append(b, `{"percent":`...)
	b = appendFloat(b, p.Percent)
	b = append(b, `,"message":`...)
	b = appendString(b, p.Message)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, p.UpdatedAt)
	return append(b, '}')
}

// appendJobs appends {"jobs":[...]} without its closing brace, so that a
// caller can add fields.
func appendJobs(b []byte, jobs []*queue.Job, withToken bool) []byte {
	b = append(b, `{"jobs":[`...)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJob(b, j, withToken)
	}
	return append(b, ']')
}

// jobBufs recycles the buffers writeJob writes a job in: the response
// writer copies what it is given (io.Writer must not retain it), so a
// buffer is free again once the answer is written. Buffers over
// maxPooledBuf are left to the collector.
var jobBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 16 << 10

// writeJob answers one job.
func writeJob(c echo.Context, status int, j *queue.Job) error {
	bp := jobBufs.Get().(*[]byte) //nolint:forcetypeassert // the pool holds nothing else
	b := appendJob(slices.Grow((*bp)[:0], 640+len(j.Payload)+len(j.Result)+len(j.Artifacts)), j, false)
	err := c.Blob(status, echo.MIMEApplicationJSON, b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		jobBufs.Put(bp)
	}
	return err
}

// writeJobs answers {"jobs":[...]}.
func writeJobs(c echo.Context, status int, jobs []*queue.Job, withToken bool) error {
	b := appendJobs(make([]byte, 0, 16+len(jobs)*700), jobs, withToken)
	return c.Blob(status, echo.MIMEApplicationJSON, append(b, '}'))
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeLayout)
	return append(b, '"')
}

func appendNullString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendFloat writes f as encoding/json does (finite values only: a
// backoff's factor and jitter are validated).
func appendFloat(b []byte, f float64) []byte {
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

// appendString appends s as a JSON string, escaped as encoding/json does
// (HTML characters, U+2028 and U+2029 included; invalid UTF-8 becomes
// U+FFFD).
func appendString(b []byte, s string) []byte {
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
