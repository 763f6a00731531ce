package queue

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/delayed"
)

// Attention: which queues need a promoter or a sweep, and when.
//
// A namespace may hold thousands of queues of which a few have work at any
// moment. So that a promoter or reclaimer tick costs in proportion to
// those few, the namespace keeps two indexes (attentionKeys): "due", each
// queue's earliest scheduled job, and "sweep", the earliest time a reclaim
// sweep of the queue has work (a lease deadline, a retention end, a dead
// job's age). A tick reads the members of one index that are due (Due,
// sweepDue) and touches only those queues.
//
// The rule: an index may say a queue needs attention earlier than it does
// (that costs one idle pass), never later and never not at all while it
// has such work. Two kinds of writes keep it:
//
//   - Marks lower an entry (ZADD LT). A queue's scripts cannot write the
//     index (another slot), so a script that adds a time earlier than any
//     its set held answers it as a mark (reply() in common.lua) and run
//     applies it after the script, with the script's Redis time as seq.
//     A time not earlier than its set's head needs no mark: the entry is
//     at that head or before it already. A rerun of a call whose reply was
//     lost (rerun_reply in common.lua) marks the current heads of what its
//     first run could have added to, since those marks were never applied.
//   - Parks set an entry to what a promote or reclaim pass found (or take
//     the queue out when it found nothing), but only when no mark from a
//     later script was applied since: each entry keeps the seq (the
//     Redis time, in µs, of the queue's script) of the latest write, and a
//     park older than it is dropped. So a park never undoes a mark it did
//     not see.
//
// A client that dies between a script and its mark leaves an entry later
// than the truth. Promoters and reclaimers therefore reconcile now and
// then (their ReconcileInterval), passing over every queue once; and a
// worker's claim promotes what is due by itself. The seq is the queue's
// master's clock: after a failover to a master whose clock is behind, a
// park may pass a mark it should have yielded to, which the same
// reconciling repairs.

// The sweep hint. Most sweep marks change nothing. A claim into a queue
// with no lease adds the earliest lease, which its script must mark, yet
// the index holds an earlier entry already: the mark of the previous
// lease, which has ended since. On the path of one job at a time that was
// a second script call after four claims in five. So a queue remembers,
// in its meta field sweep_hint ("<ms>|<set at ms>", by Redis's clock),
// the time its last sweep mark put its entry at, and a script leaves out
// a sweep mark no earlier than that, for sweepHintFor after the hint was
// set (sweep_mark in common.lua). The hint holds because:
//
//   - a mark that goes sets the hint to itself, and lowers the entry to
//     it or below (ZADD LT);
//   - only a park raises an entry, and the reclaim pass that a sweep
//     park follows deletes the hint in its own script: a mark from after
//     the pass goes, and wins over the park by its seq (above);
//   - a rerun marks whatever the hint says (rerun_reply), as its first
//     run's marks may never have been applied.
//
// What can still leave an entry later than its hint is what leaves one
// later than the truth without it: a client that dies between a script
// and its mark, or a failover of the index's master that loses a mark.
// The hint's age bounds that: past sweepHintFor the next sweep mark goes
// again, so such a queue is repaired by its next claim after 10 s, as
// before by its next claim into an empty lease set, not only by the
// reconcile. A hint set later than now (the queue's master's clock went
// back) is not used.

// marked are the marks a script's reply carries (see store.UnwrapMarks).
type marked = store.Marks

// markTimeout bounds a mark.
const markTimeout = 5 * time.Second

// mark applies a script's marks. The script's change is made already, so
// a failure here is not the caller's: the marks are kept for remarkLoop
// to apply once Redis answers, and counted (MarkFailures).
func (c *Client) mark(ctx context.Context, queue string, m marked) {
	if m.DueMs == 0 && m.SweepMs == 0 && m.WFMs == 0 {
		return
	}
	if m.WFMs != 0 {
		c.nudgeReleasers(queue)
	}
	if m.DueMs != 0 {
		c.nudgeLocal(queue, m.DueMs)
	}
	// The change is made: its mark follows it even when the caller has
	// gone, but does not keep the caller long when Redis has.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := c.sendMark(ctx, queue, m); err != nil {
		c.markFailures.Add(1)
		c.remarkLater(queue, m)
	}
}

// sendMark runs mark.lua for queue's marks m.
func (c *Client) sendMark(ctx context.Context, queue string, m marked) error {
	a := store.AttentionKeys(c.ns)
	if m.DueMs != 0 || m.SweepMs != 0 {
		if _, err := store.CallGlobal(ctx, c.eng, store.Mark, []string{a.Due, a.DueSeq, a.Sweep, a.SweepSeq},
			&store.MarkArgs{Queue: queue, AtA: m.DueMs, AtB: m.SweepMs, Seq: m.Seq, Channel: store.NudgeChannel(c.ns),
				Nudge: queue + "|" + strconv.FormatInt(m.DueMs, 10) + "|" + c.instance}); err != nil {
			return err
		}
	}
	if m.WFMs != 0 {
		// the outbox index, in the places of the sweep index
		w := store.WorkflowAttentionKeys(c.ns)
		_, err := store.CallGlobal(ctx, c.eng, store.Mark, []string{a.Due, a.DueSeq, w.Outbox, w.OutboxSeq},
			&store.MarkArgs{Queue: queue, AtB: m.WFMs, Seq: m.Seq})
		return err
	}
	return nil
}

// uncertain is called when a script of queue failed in a way that leaves
// open whether it ran (the connection broke after the request, a
// timeout): a run whose reply was lost may have noted marks that no one
// will apply. The queue is marked at now in both indexes instead, which is
// early (a promoter's or a sweep's pass finds its real times and parks
// it), never late. The mark goes in the background: the caller, whose
// call just failed, does not wait on Redis a second time.
func (c *Client) uncertain(queue string, err error) {
	if err == nil || store.IsScriptError(err) {
		return
	}
	now := c.redisNow().UnixMilli()
	c.remarkLater(queue, marked{DueMs: now, SweepMs: now, WFMs: now})
}

// remarkLater keeps marks m of queue (with those kept already, the
// earliest of each) for remarkLoop, which applies them every remarkEvery
// until Redis takes them, for as long as the client is open: a mark that
// could not be applied when it was made is applied once Redis is back, as
// early as it was, not left to the next reconcile.
func (c *Client) remarkLater(queue string, m marked) {
	c.remarkMu.Lock()
	defer c.remarkMu.Unlock()
	if c.closed {
		return
	}
	if c.remark == nil {
		c.remark = map[string]marked{}
	}
	kept, ok := c.remark[queue]
	if ok {
		m.DueMs, m.SweepMs = earliestMs(kept.DueMs, m.DueMs), earliestMs(kept.SweepMs, m.SweepMs)
		m.WFMs = earliestMs(kept.WFMs, m.WFMs)
	}
	m.Seq = 0 // applied late: it may not raise an entry's seq (see park.lua)
	c.remark[queue] = m
	if !c.remarking {
		c.remarking = true
		go c.remarkLoop()
	}
}

// earliestMs is the earlier of two marks, 0 being none.
func earliestMs(a, b int64) int64 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// remarkEvery is how often a mark that failed is tried again.
const remarkEvery = 500 * time.Millisecond

func (c *Client) remarkLoop() {
	for {
		t := time.NewTimer(remarkEvery)
		select {
		case <-c.closing:
			t.Stop()
		case <-t.C:
		}
		c.remarkMu.Lock()
		if c.closed || len(c.remark) == 0 {
			c.remarking = false
			c.remarkMu.Unlock()
			return
		}
		todo := maps.Clone(c.remark)
		c.remarkMu.Unlock()
		for q, m := range todo {
			ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
			err := c.sendMark(ctx, q, m)
			cancel()
			if err == nil {
				c.remarkMu.Lock()
				if c.remark[q] == m { // not lowered meanwhile
					delete(c.remark, q)
				}
				c.remarkMu.Unlock()
			}
		}
	}
}

// MarkFailures is how many times this client could not lower an attention
// index after a change (Redis unreachable at that instant): each leaves a
// queue's promotion or sweep to the next reconcile of the promoters and
// reclaimers, or to a claim.
func (in *inside) MarkFailures() int64 { return in.markFailures.Load() }

// park sets queue's entry in the index idx (attentionKeys' due or sweep,
// with seqs its seq hash) to atMs, 0 for none, as found by a script that
// ran at seq.
func (c *Client) park(ctx context.Context, idx, seqs, queue string, atMs, seq int64) error {
	if seq <= 0 {
		return nil
	}
	if _, err := store.CallGlobal(ctx, c.eng, store.Park, []string{idx, seqs}, &store.ParkArgs{Queue: queue, At: atMs, Seq: seq}); err != nil {
		return fmt.Errorf("queue: index %s: %w", queue, err)
	}
	return nil
}

// unmark takes queue out of the indexes (it was deleted).
func (c *Client) unmark(ctx context.Context, queue string) error {
	a := store.AttentionKeys(c.ns)
	_, err := store.CallGlobal(ctx, c.eng, store.Unmark, []string{a.Due, a.DueSeq, a.Sweep, a.SweepSeq}, &store.UnmarkArgs{Queue: queue})
	return err
}

// Due is for a promoter (pass the client as delayed.Config.Source; it
// implements delayed.Source): it answers, earliest first, limit of them
// from the offset-th, the queues whose earliest scheduled job is due within the
// next `within` by the due index, with that time on this client's clock.
// The index may name a queue that has nothing due (a pass finds out and
// parks it); it names every queue that has, but after a lost mark (see
// attention.go).
func (in *inside) Due(ctx context.Context, within time.Duration, offset, limit int) ([]delayed.Nudge, error) {
	c := (*Client)(in)
	return c.attention(ctx, store.AttentionKeys(c.ns).Due, within, offset, limit)
}

// sweepDue answers the queues whose next sweep work is due by now
// (Redis's clock, as estimated here).
func (c *Client) sweepDue(ctx context.Context, limit int) ([]delayed.Nudge, error) {
	return c.attention(ctx, store.AttentionKeys(c.ns).Sweep, 0, 0, limit)
}

func (c *Client) attention(ctx context.Context, idx string, within time.Duration, offset, limit int) ([]delayed.Nudge, error) {
	by := c.redisNow().Add(within).UnixMilli()
	zs, err := c.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: idx, ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(by, 10), Offset: int64(offset), Count: int64(limit)}).Result()
	if err != nil {
		return nil, wrapRedis(err)
	}
	out := make([]delayed.Nudge, 0, len(zs))
	for _, z := range zs {
		q, _ := z.Member.(string)
		if names.ValidateQueue(q) != nil {
			continue
		}
		out = append(out, delayed.Nudge{Queue: q, At: c.localOf(time.UnixMilli(int64(z.Score)).UTC())})
	}
	return out, nil
}

// redisNow is this client's estimate of Redis's clock now.
func (c *Client) redisNow() time.Time {
	return c.clock.Now().Add(c.eng.Clock().Offset())
}
