package queue

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"math"
	"strconv"
	"strings"
	"time"
)

// Job management: the calls an operator (the HTTP API, the dashboard, the
// CLI) makes on jobs that are not theirs to run. Each change of state is
// one script; the dead-set sweeps work in bounded batches.

// Limits of the management calls.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
	// MaxPendingListDepth is how deep a listing of pending jobs goes (the
	// next to be claimed first): reading further into a list is O(depth),
	// and a cursor could ask for any depth. Deeper jobs show in the counts.
	MaxPendingListDepth = 10_000
	// deadBatch is the most dead-set entries one dead.lua call examines:
	// 50 requeues or deletes take well under a millisecond of Redis time
	// (about 1 ms on a loaded 2-core test machine).
	deadBatch = 50
)

// ListOptions select a page of [Client.List].
type ListOptions struct {
	// Status picks what to list, and in which order:
	//   - StatusScheduled: by run-at, soonest first
	//   - StatusPending: next to be claimed first
	//   - StatusProcessing: longest claimed first
	//   - StatusCompleted: the capped history of completions, newest first
	//   - StatusDead: newest death first
	// Canceled jobs sit in no list and cannot be listed. Required.
	Status Status
	// Limit is the most jobs in the page, 1 to 1000. Defaults to 50.
	Limit int
	// Cursor is the nextCursor of the previous page; empty for the first.
	Cursor string
}

// List reads one page of the jobs of queue in one status, and the cursor of
// the next page ("" after the last), in one script call. Ids whose job has
// left that status without leaving the list (a canceled pending job) are
// left out, so a page may hold fewer than Limit jobs.
//
// Paging while jobs move:
//   - Scheduled, processing and dead (sorted sets; processing is read
//     from the leases set, soonest deadline first, and a heartbeat that
//     extends a lease while pages are read can show its job again, never
//     hide it): the cursor is the (score, id) of
//     the last job of the page, found again by binary search. A job that
//     stays in the set while the pages are read appears exactly once, even
//     when the cursor's own job has left it; jobs added ahead of the cursor
//     are not shown.
//   - Pending (a list, read from the end where jobs leave, to a depth of
//     MaxPendingListDepth):
//     the next page starts right after the cursor's job. Jobs claimed from
//     the head or added at the tail while paging are neither missed nor
//     repeated. When the cursor's job itself has left the list, the next
//     page starts again at the head: nothing is missed, but jobs still
//     there that were shown before (those behind a job canceled or
//     rescheduled) are shown again.
//   - Completed (a capped set by completion time, newest first): paged as
//     the sorted sets above.
func (c *Client) List(ctx context.Context, queue string, o ListOptions) (jobs []*Job, nextCursor string, err error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, "", err
	}
	limit := cmp.Or(o.Limit, DefaultListLimit)
	if limit < 1 || limit > MaxListLimit {
		return nil, "", invalid("limit", "must be in [1, %d], got %d", MaxListLimit, o.Limit)
	}
	switch o.Status {
	case StatusScheduled, StatusDead, StatusPending, StatusProcessing, StatusCompleted:
	default:
		return nil, "", invalid("status", "must be scheduled, pending, processing, completed or dead, got %q", o.Status)
	}
	cnum, cid := "0", ""
	if o.Cursor != "" {
		if cnum, cid, err = decodeCursor(o.Status, o.Cursor); err != nil {
			return nil, "", err
		}
		if n, _ := strconv.Atoi(cnum); o.Status == StatusPending && n >= MaxPendingListDepth {
			return nil, "", invalid("cursor", "pending jobs are listed to a depth of %d", MaxPendingListDepth)
		}
	}
	res, err := call(ctx, c, store.List, k, &store.ListArgs{Status: string(o.Status), Limit: limit, CursorNum: cnum, CursorID: cid})
	if err != nil {
		return nil, "", fmt.Errorf("queue: list %s of %s: %w", o.Status, queue, err)
	}
	more, lastNum, lastID := res.More, res.LastNum, res.LastID
	jobs = make([]*Job, 0, len(res.Jobs))
	for i := range res.Jobs {
		p, err := store.Str("list", res.Jobs, i, "job")
		if err != nil {
			return nil, "", fmt.Errorf("queue: list %s of %s: %w", o.Status, queue, err)
		}
		j, err := c.jobOfReply(queue, p)
		if err != nil {
			return nil, "", fmt.Errorf("queue: list %s of %s: %w", o.Status, queue, err)
		}
		jobs = append(jobs, j)
	}
	if more == 1 && lastID != "" {
		if n, _ := strconv.Atoi(lastNum); o.Status != StatusPending || n+1 < MaxPendingListDepth {
			nextCursor = encodeCursor(o.Status, lastNum, lastID)
		}
	}
	return jobs, nextCursor, nil
}

// A cursor is "<status>:<score or position>:<id>", base64url encoded so
// that callers treat it as opaque.
func encodeCursor(s Status, num, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(s) + ":" + num + ":" + id))
}

func decodeCursor(s Status, cursor string) (num, id string, err error) {
	bad := invalid("cursor", "not a cursor of a %s listing", s)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", "", bad
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || parts[0] != string(s) || names.ValidateID(parts[2]) != nil {
		return "", "", bad
	}
	switch s {
	case StatusScheduled, StatusDead, StatusProcessing, StatusCompleted:
		f, err := strconv.ParseFloat(parts[1], 64)
		if err != nil || math.IsNaN(f) {
			return "", "", bad
		}
	default:
		if n, err := strconv.ParseInt(parts[1], 10, 64); err != nil || n < 0 {
			return "", "", bad
		}
	}
	return parts[1], parts[2], nil
}

// The answers of cancel.lua.
const (
	cancelConflict  = 0
	cancelDone      = 1
	cancelRepeated  = 2
	cancelRequested = 3
	cancelDeleted   = 4
)

// Cancel cancels a job or deletes a finished one, depending on its status:
//   - scheduled or pending: it is canceled (status StatusCanceled) and
//     leaves its set or list; its hash is kept for the job's retention
//     (ResultTTL, or Config.Retention), then expires.
//   - processing: its cancellation is requested (CancelRequested); the
//     worker sees it on its next heartbeat, cancels the handler's context
//     and ends the job with [Client.CancelClaimed]. The job is answered as
//     it is, still processing.
//   - completed, dead or canceled: it is deleted, with its idempotency
//     record; the job is answered as it was.
//
// It is one script. A call retried after a lost reply answers the same,
// except a delete, whose retry answers ErrNotFound.
func (c *Client) Cancel(ctx context.Context, queue, id string) (*Job, error) {
	j, _, err := c.cancel(ctx, queue, id, "")
	return j, err
}

// CancelClaimed ends, as canceled, a claimed job whose cancellation was
// requested (its worker saw Lease.CancelRequested): the job leaves
// processing and is kept for its retention as Cancel keeps it. It answers
// ErrLeaseLost, and changes nothing, when token is not the job's current
// claim.
func (c *Client) CancelClaimed(ctx context.Context, queue, id, token string) error {
	if token == "" {
		return invalid("token", "a claim token is required")
	}
	_, _, err := c.cancel(ctx, queue, id, token)
	return err
}

func (c *Client) cancel(ctx context.Context, queue, id, claim string) (*Job, int64, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, 0, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, 0, err
	}
	req := claim
	if req == "" {
		req = newToken()
	}
	res, err := call(ctx, c, store.Cancel, k, &store.CancelArgs{ID: id, Request: req, RetentionMs: max(c.cfg.Retention.Milliseconds(), 0),
		ClaimToken: claim, TombMs: c.tombMs()})
	if err != nil {
		return nil, 0, fmt.Errorf("queue: cancel %s/%s: %w", queue, id, err)
	}
	code, status := res.Code, res.Status
	switch code {
	case codeNotFound:
		return nil, code, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	case cancelConflict:
		if claim != "" {
			return nil, code, fmt.Errorf("%w: job %s/%s is %s", ErrLeaseLost, queue, id, status)
		}
		return nil, code, fmt.Errorf("%w: job %s/%s is %s", ErrConflict, queue, id, status)
	case cancelDone, cancelRepeated, cancelRequested, cancelDeleted:
		p := res.Job
		if p == "" {
			return &Job{ID: id, Queue: queue, Status: Status(status)}, code, nil
		}
		j, err := parsePacked(queue, p)
		if j != nil {
			j.Token = ""
		}
		return j, code, err
	}
	return nil, code, fmt.Errorf("queue: cancel %s/%s: unexpected answer %d", queue, id, code)
}

// Reschedule gives a scheduled or pending job a new run-at, keeping its
// id: a run-at ahead puts it in scheduled (waking the promoters when it is
// now the earliest), a due one puts it at the back of pending. As at
// enqueue, the schedule keeps runAt to the microsecond and the job's
// RunAt is its millisecond. Jobs in any other status answer ErrConflict.
func (c *Client) Reschedule(ctx context.Context, queue, id string, runAt time.Time) (*Job, error) {
	if runAt.IsZero() {
		return nil, invalid("run_at", "is required")
	}
	if runAt.After(c.clock.Now().Add(MaxDelay)) {
		return nil, invalid("run_at", "more than %s ahead", MaxDelay)
	}
	return c.reschedule(ctx, queue, id, "a"+scoreOf(runAt))
}

// RescheduleIn is Reschedule to d after Redis's now, by Redis's clock: a
// host whose clock is off does not move it, as it would a run-at made of
// the host's now and d. d is 0 to MaxDelay.
func (c *Client) RescheduleIn(ctx context.Context, queue, id string, d time.Duration) (*Job, error) {
	if d < 0 || d > MaxDelay {
		return nil, invalid("delay", "must be in [0, %s], got %s", MaxDelay, d)
	}
	return c.reschedule(ctx, queue, id, delayWhen(d))
}

// reschedule runs reschedule.lua for Reschedule and RescheduleIn, with
// when in its form ("a<score>" or "d<µs>").
func (c *Client) reschedule(ctx context.Context, queue, id, when string) (*Job, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	res, err := call(ctx, c, store.Reschedule, k, &store.RescheduleArgs{ID: id, When: when})
	if err != nil {
		return nil, fmt.Errorf("queue: reschedule %s/%s: %w", queue, id, err)
	}
	code, status := res.Code, res.Status
	switch code {
	case codeNotFound:
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	case 0:
		return nil, fmt.Errorf("%w: job %s/%s is %s, only scheduled and pending jobs can be rescheduled", ErrConflict, queue, id, status)
	}
	return c.jobOfReply(queue, res.Job)
}

// RunNow sends a scheduled job, or a dead one, to the back of pending now.
// A dead job starts afresh: its attempts go back to 0, so it has its
// MaxAttempts again and its backoff starts over from the first delay (its
// last error is kept). A job already pending is answered as it is. Other
// statuses answer ErrConflict.
func (c *Client) RunNow(ctx context.Context, queue, id string) (*Job, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	res, err := call(ctx, c, store.RunNow, k, &store.RunNowArgs{ID: id})
	if err != nil {
		return nil, fmt.Errorf("queue: run now %s/%s: %w", queue, id, err)
	}
	code, status := res.Code, res.Status
	switch code {
	case codeNotFound:
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	case 0:
		return nil, fmt.Errorf("%w: job %s/%s is %s, only scheduled and dead jobs can be run now", ErrConflict, queue, id, status)
	}
	return c.jobOfReply(queue, res.Job)
}

// jobOfReply reads a job packed by a script, without its claim token.
func (c *Client) jobOfReply(queue string, p string) (*Job, error) {
	j, err := parsePacked(queue, p)
	if err != nil {
		return nil, err
	}
	j.Token = ""
	return j, nil
}

// RequeueDead sends the dead jobs of queue (those of kind only, unless kind
// is empty) to the back of pending, each afresh as [Client.RunNow] does,
// and answers how many went. It works in batches of 50 per script call,
// so Redis is never blocked for long, and leaves alone jobs that die while
// it runs.
func (c *Client) RequeueDead(ctx context.Context, queue, kind string) (int, error) {
	return c.sweepDead(ctx, queue, kind, "requeue")
}

// PurgeDead deletes the dead jobs of queue (those of kind only, unless kind
// is empty), with their idempotency records, and answers how many went. It
// works in batches as [Client.RequeueDead] does.
func (c *Client) PurgeDead(ctx context.Context, queue, kind string) (int, error) {
	return c.sweepDead(ctx, queue, kind, "purge")
}

func (c *Client) sweepDead(ctx context.Context, queue, kind, mode string) (int, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return 0, err
	}
	if kind != "" {
		if err := names.ValidateKind(kind); err != nil {
			return 0, err
		}
	}
	upto := int64(-1) // Redis's now at the first batch, which answers it
	total := 0
	cscore, cid := "", ""
	for range maxScriptLoops {
		res, err := call(ctx, c, store.Dead, k, &store.DeadArgs{Mode: mode, Kind: kind, Batch: deadBatch, Upto: upto,
			CursorScore: cscore, CursorID: cid, TombMs: c.tombMs()})
		if err != nil {
			return total, fmt.Errorf("queue: %s dead of %s: %w", mode, queue, err)
		}
		upto = res.Upto
		total += int(res.Count)
		if res.Done == 1 {
			return total, nil
		}
		cscore, cid = res.LastScore, res.LastID
	}
	return total, fmt.Errorf("queue: %s dead of %s: stopped after %d batches, call again for the rest", mode, queue, maxScriptLoops)
}

// WaitPending waits until queue has a pending job, for at most wait (1 ms
// to MaxClaimWait), and reports whether it has one. It claims nothing: a
// worker runtime waits with it when idle, then claims as many jobs as it
// has room for with [Client.Claim], so an idle wait holds none of its
// slots. A paused queue waits out wait on the clock and answers false.
// A pending job the queue's Limits hold back does not count: the wait
// goes on until the bucket's next token (or, at MaxInFlight, until a lease
// ends: the scripts that end one write to the wake stream).
//
// The wait is on the client's wake hub for the queue and labels, as a
// claim's wait is (see ClaimOptions.Wait).
func (in *inside) WaitPending(ctx context.Context, queue string, wait time.Duration) (bool, error) {
	return in.WaitClaimable(ctx, queue, wait, nil)
}

// WaitClaimable is WaitPending for a claimer with labels (as
// ClaimOptions.Labels): it counts only the pending jobs such a claimer
// receives, and waits on the wake streams of their label sets.
func (in *inside) WaitClaimable(ctx context.Context, queue string, wait time.Duration, labels []string) (bool, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return false, err
	}
	if labels, err = names.CanonicalLabels(labels, MaxClaimLabels); err != nil {
		return false, &FieldError{Index: -1, Field: "labels", Err: err}
	}
	if wait < time.Millisecond || wait > MaxClaimWait {
		return false, invalid("wait", "must be in [1ms, %s], got %s", MaxClaimWait, wait)
	}
	return c.waitClaimable(ctx, queue, k, wait, labels)
}

// waitClaimable is WaitClaimable once its arguments are checked: it asks
// wait.lua whether a job is claimable, and until one is, or the wait ends,
// waits for the bucket's next token or on the wake hub and asks again.
func (c *Client) waitClaimable(ctx context.Context, queue string, k store.Keys, wait time.Duration, labels []string) (bool, error) {
	deadline := time.Now().Add(wait) // Redis waits in real time
	for {
		p := store.WaitArgs{WaitMs: wait.Milliseconds()}
		res, err := callSets(ctx, c, store.Wait, k, &p, labels, &p.Eligible)
		if err != nil {
			return false, fmt.Errorf("queue: wait for %s: %w", queue, err)
		}
		if res.Pending > 0 {
			return true, nil
		}
		left := time.Until(deadline)
		at, err := waitLimitAt(queue, res.At)
		if err != nil {
			return false, err
		}
		if at != "" {
			// Pending, but the bucket lets no claim take a job now: wait
			// for its next token and look again. (At MaxInFlight, at is
			// "" and the wait is on the wake stream, below.)
			if left <= 0 || ctx.Err() != nil {
				return false, nil //nolint:nilerr // a wait that ended answers false, not an error
			}
			c.sleepLimited(ctx, c.parseLimitAt(at), left)
			continue
		}
		if res.Paused == 1 {
			c.sleepCtx(ctx, max(left, 0))
			return false, nil
		}
		if left <= 0 || ctx.Err() != nil {
			return false, nil //nolint:nilerr // a wait that ended answers false, not an error
		}
		// Not woken, the wait ran out (see Claim's).
		woken, err := c.awaitWake(ctx, "wait for", queue, k, labels, res.At != nil, left)
		if err != nil || !woken {
			return false, err
		}
		wait = max(time.Until(deadline), time.Millisecond)
	}
}

// waitLimitAt reads wait.lua's "at": nil, the limits hold nothing back;
// "", held back at MaxInFlight (until a lease ends); otherwise the time of
// the bucket's next token.
func waitLimitAt(queue string, at any) (string, error) {
	s, ok := at.(string)
	if at != nil && !ok {
		return "", fmt.Errorf("queue: wait for %s: %w", queue, &store.ReplyError{Script: "wait", Field: "at", Reply: at, Want: "a string"})
	}
	return s, nil
}
