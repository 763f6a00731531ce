package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// A job's log: lines a running job appends with its claim token
// ([Client.AppendLog]), kept with the job (deleted with it) and read with
// [Client.Logs]. Each line gets a sequence number, from 1, and the time
// (Redis's) it was appended. The log is append-only and capped: once it
// holds MaxLogLines lines or MaxLogBytes bytes of lines, further lines
// are dropped and the log is marked truncated (an append is not refused
// for it). A line longer than MaxLogLineBytes is cut there, with
// LogTruncatedMark at its end. A retried job goes on appending to the
// same log.
//
// Storage: line seq is the field "<id>.l.<seq>" of the queue's data hash
// ("<at ms>|<line>"); the job's record counts them (field "log"), so an
// append is O(its lines) and deleting the job deletes its lines.
const (
	// MaxLogLines caps the lines of one job's log.
	MaxLogLines = 1000
	// MaxLogBytes caps the bytes of one job's log lines together.
	MaxLogBytes = 1 << 20
	// MaxLogLineBytes caps one line: a longer one is cut (see
	// LogTruncatedMark).
	MaxLogLineBytes = 8 << 10
	// MaxLogBatch caps the lines of one AppendLog call.
	MaxLogBatch = 100
	// MaxLogPage caps the lines one Logs call answers; DefaultLogPage is
	// what it answers when asked for none in particular.
	MaxLogPage     = 1000
	DefaultLogPage = 200
	// LogTruncatedMark ends a line that was cut at MaxLogLineBytes.
	LogTruncatedMark = "…(truncated)"
)

// LogLine is one line of a job's log.
type LogLine struct {
	Seq  int64     // from 1
	At   time.Time // Redis's time of the append, to the ms
	Line string
}

// LogAppend is the answer to AppendLog.
type LogAppend struct {
	// Added is how many of the lines were appended: fewer than given when
	// the log reached its cap (the rest were dropped).
	Added int
	// Last is the seq of the log's last line (0: none yet).
	Last int64
	// Truncated: the log reached its cap, and lines were dropped.
	Truncated bool
}

// LogPage is a page of a job's log.
type LogPage struct {
	Lines []LogLine
	// Next is the seq to read after for the next page: the last line's
	// seq, or the after asked when the page is empty.
	Next int64
	// Total is the number of lines the log holds.
	Total int64
	// Truncated: the log reached its cap and lines were dropped.
	Truncated bool
	// Status is the job's status when the page was read.
	Status Status
}

// cleanLogLine makes line valid UTF-8 and cuts it at MaxLogLineBytes.
func cleanLogLine(line string) string {
	line = strings.ToValidUTF8(line, "\uFFFD")
	if len(line) > MaxLogLineBytes {
		cut := MaxLogLineBytes - len(LogTruncatedMark)
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + LogTruncatedMark
	}
	return line
}

// AppendLog appends lines (1 to MaxLogBatch) to the log of a claimed job.
// It answers ErrLeaseLost, and changes nothing, when token is not the
// job's current claim. Lines are made valid UTF-8 and cut at
// MaxLogLineBytes; once the log is full the lines that do not fit are
// dropped (LogAppend.Truncated). A retried call (its reply lost) appends
// nothing twice.
func (c *Client) AppendLog(ctx context.Context, queue, id, token string, lines []string) (LogAppend, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return LogAppend{}, err
	}
	if err := names.ValidateID(id); err != nil {
		return LogAppend{}, err
	}
	if len(lines) == 0 || len(lines) > MaxLogBatch {
		return LogAppend{}, invalid("lines", "an append holds 1 to %d lines, got %d", MaxLogBatch, len(lines))
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := store.LogArgs{ID: id, Token: token, Batch: hex.EncodeToString(b[:]), MaxLines: MaxLogLines, MaxBytes: MaxLogBytes,
		Lines: make([]store.LogLine, 0, len(lines))}
	for _, l := range lines {
		p.Lines = append(p.Lines, store.LogLine{Line: cleanLogLine(l)})
	}
	res, err := call(ctx, c, store.Log, k, &p)
	if err != nil {
		return LogAppend{}, fmt.Errorf("queue: append to the log of %s/%s: %w", queue, id, err)
	}
	if err := codeErr(res.Code, queue, id); err != nil {
		return LogAppend{}, err
	}
	added, last, trunc := res.Added, res.LastSeq, res.Truncated
	return LogAppend{Added: int(added), Last: last, Truncated: trunc == 1}, nil
}

// parseLogState reads a record's log field: lines and truncated.
func parseLogState(s string) (lines int64, truncated bool) {
	f := strings.Split(s, "|")
	if len(f) < 3 {
		return 0, false
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n, f[2] == "1"
}

// Logs reads up to limit lines (DefaultLogPage when 0, at most MaxLogPage)
// of a job's log after seq after (0: from the start): the job's record,
// then the lines (two round trips, one when there is none to read).
func (c *Client) Logs(ctx context.Context, queue, id string, after int64, limit int) (LogPage, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return LogPage{}, err
	}
	if err := names.ValidateID(id); err != nil {
		return LogPage{}, err
	}
	if after < 0 {
		return LogPage{}, invalid("after", "must not be negative, got %d", after)
	}
	if limit == 0 {
		limit = DefaultLogPage
	}
	if limit < 1 || limit > MaxLogPage {
		return LogPage{}, invalid("limit", "must be in [1, %d], got %d", MaxLogPage, limit)
	}
	// The record says how many lines there are; then the page's lines, by
	// their fields (a read that finds no new line is one round trip: a
	// job's stream reads this at each of its events).
	r, err := c.rdb.HGet(ctx, k.Jobs, id).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return LogPage{}, wrapRedis(err)
	}
	if r == "" || r[0] == '-' {
		return LogPage{}, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	}
	_, f, _ := splitRecord(r)
	page := LogPage{Next: after}
	if len(f) > store.RStatus {
		page.Status = Status(f[store.RStatus])
	}
	if len(f) > store.RLog {
		page.Total, page.Truncated = parseLogState(f[store.RLog])
	}
	n := min(int64(limit), page.Total-after)
	if n <= 0 {
		return page, nil
	}
	fields := make([]string, 0, n)
	for s := after + 1; s <= after+n; s++ {
		fields = append(fields, store.LogLineField(id, s))
	}
	vals, err := c.rdb.HMGet(ctx, k.Data, fields...).Result()
	if err != nil {
		return LogPage{}, wrapRedis(err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			break // the job was deleted meanwhile
		}
		seq := after + 1 + int64(i)
		ms, line, _ := strings.Cut(s, "|")
		page.Lines = append(page.Lines, LogLine{Seq: seq, At: msTime(ms), Line: line})
		page.Next = seq
	}
	return page, nil
}

// Progress is how far a running job says it is, as its heartbeats carry
// it ([HeartbeatOptions].Progress).
type Progress struct {
	// Percent is 0 to 100.
	Percent float64
	// Message is at most MaxProgressMessageBytes (longer ones are cut).
	Message string
	// UpdatedAt is Redis's time of the heartbeat that carried it (set by
	// the store; ignored in a heartbeat).
	UpdatedAt time.Time
}

// MaxProgressMessageBytes caps a progress message: a longer one is cut.
const MaxProgressMessageBytes = 1 << 10

// encodeProgress checks p and writes it as heartbeat.lua reads it,
// "<percent>|<message>" ("" for none).
func encodeProgress(p *Progress) (string, error) {
	if p == nil {
		return "", nil
	}
	if !(p.Percent >= 0 && p.Percent <= 100) {
		return "", invalid("progress.percent", "must be in [0, 100], got %v", p.Percent)
	}
	msg := strings.ToValidUTF8(strings.ReplaceAll(p.Message, "\x00", "\uFFFD"), "\uFFFD")
	if len(msg) > MaxProgressMessageBytes {
		cut := MaxProgressMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return strconv.FormatFloat(math.Abs(p.Percent), 'f', -1, 64) + "|" + msg, nil // Abs: no "-0"
}

// parseProgress reads a record's progress field (nil for none).
func parseProgress(s string) *Progress {
	if s == "" {
		return nil
	}
	pct, rest, ok1 := strings.Cut(s, "|")
	at, msg, ok2 := strings.Cut(rest, "|")
	p, err := strconv.ParseFloat(pct, 64)
	if !ok1 || !ok2 || err != nil {
		return nil
	}
	return &Progress{Percent: p, Message: msg, UpdatedAt: msTime(at)}
}
