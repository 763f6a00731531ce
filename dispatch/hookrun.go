package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
)

// HookAttempt is one request of an event webhook delivery, for
// Config.OnHookAttempt.
type HookAttempt struct {
	Subscription string
	ID           string // the delivery's: "<queue>/<outbox entry id>", its webhook-id
	Attempt      int
	Status       int // 0: no response
	Error        string
	// Outcome is "delivered", "retry" or "dead".
	Outcome string
}

// hookLoop runs the event webhook passes, one each Config.HookInterval
// (a timer set again after each pass, so a pass never overlaps the next),
// until ctx ends; then it waits for the deliveries under way.
func (d *Dispatcher) hookLoop(ctx context.Context) {
	var sending sync.WaitGroup
	defer sending.Wait()
	for {
		t := d.clock.NewTimer(d.cfg.HookInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
		if err := d.hookPass(ctx, &sending); err != nil && ctx.Err() == nil {
			d.log.Warn("dispatch: event webhooks", "err", err)
		}
	}
}

// hookPass fans out the outboxes' entries, then starts sending every
// subscription's due deliveries, in a goroutine a subscription (added to
// sending), and records their outcomes. A subscription whose sending of
// an earlier pass is still under way (a slow receiver) is left to it, so
// that one slow receiver holds up no other.
func (d *Dispatcher) hookPass(ctx context.Context, sending *sync.WaitGroup) error {
	subs, err := d.hooks.List(ctx)
	if err != nil {
		return err
	}
	queues := d.hookQueues(ctx, subs)
	var errs []error
	if len(queues) > 0 {
		entries, err := d.hooks.readOutboxes(ctx, queues)
		if err != nil {
			return err
		}
		dropped, err := d.hooks.fanOut(ctx, subs, entries)
		if dropped > 0 {
			d.metrics.hooksDropped.Add(float64(dropped))
			d.log.Warn("dispatch: event webhook deliveries dropped: a subscription holds its cap of pending deliveries",
				"dropped", dropped, "cap", MaxHookPending)
		}
		errs = append(errs, err)
	}
	for _, s := range subs {
		if _, busy := d.hookBusy.LoadOrStore(s.ID, true); busy {
			continue
		}
		sending.Go(func() {
			defer d.hookBusy.Delete(s.ID)
			if err := d.deliver(ctx, s); err != nil && ctx.Err() == nil {
				d.log.Warn("dispatch: event webhooks", "subscription", s.ID, "err", err)
			}
		})
	}
	return errors.Join(errs...)
}

// hookQueues are the queues whose outboxes a pass reads: those the last
// Sync left on, and those the subscriptions name.
func (d *Dispatcher) hookQueues(ctx context.Context, subs []Subscription) []string {
	set := map[string]bool{}
	if on := d.hooksOn.Load(); on != nil {
		for _, q := range *on {
			set[q] = true
		}
	}
	for _, s := range subs {
		for _, q := range s.Queues {
			set[q] = true
		}
	}
	if slices.ContainsFunc(subs, func(s Subscription) bool { return len(s.Queues) == 0 }) {
		if qs, err := d.client.Queues(ctx); err == nil {
			for _, q := range qs {
				set[q] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	return out
}

// syncHooks is the refresh's Sync: it remembers the queues left on.
func (d *Dispatcher) syncHooks(ctx context.Context) error {
	on, err := d.hooks.sync(ctx)
	if err != nil {
		return err
	}
	d.hooksOn.Store(&on)
	return nil
}

// deliver sends s's due deliveries, each job's one at a time.
func (d *Dispatcher) deliver(ctx context.Context, s Subscription) error {
	k := d.hooks.keys(s.ID).List()
	offset := plumbing.Of(d.client).Engine().Clock().OffsetUs(store.Exact)
	r, err := store.CallGlobal(ctx, d.hooks.eng, store.HookClaim, k, &store.HookClaimArgs{OffsetUs: offset, ID: s.ID,
		Scan: hookScan, Max: hookClaim, LeaseMs: (s.Timeout + hookLeaseExtra).Milliseconds()})
	if err != nil {
		return fmt.Errorf("dispatch: taking deliveries of subscription %s: %w", s.ID, err)
	}
	if r.Now < 0 || len(r.Rows) == 0 {
		return nil
	}
	taken, err := takenDeliveries(r.Rows)
	if err != nil {
		// Nothing is sent: the leases of what was taken lapse, and a later
		// pass takes the deliveries again.
		return fmt.Errorf("dispatch: taking deliveries of subscription %s: %w", s.ID, err)
	}
	acks := make([]store.HookAckItem, len(taken))
	var wg sync.WaitGroup
	for i, t := range taken {
		wg.Go(func() { acks[i] = d.sendHook(ctx, s, t.key, t.attempts, []byte(t.body)) })
	}
	wg.Wait()
	_, err = store.CallGlobal(context.WithoutCancel(ctx), d.hooks.eng, store.HookAck, k, &store.HookAckArgs{
		OffsetUs: plumbing.Of(d.client).Engine().Clock().OffsetUs(store.Exact), ID: s.ID, MaxDead: MaxHookDead, Acks: acks})
	if err != nil {
		return fmt.Errorf("dispatch: recording deliveries of subscription %s: %w", s.ID, err)
	}
	return nil
}

// takenDelivery is one delivery hook_claim.lua took: its key, the
// attempt this is, and its event's body.
type takenDelivery struct {
	key      string
	attempts int
	body     string
}

// takenDeliveries reads hook_claim.lua's rows, three values a delivery,
// through the engine's typed readers: a changed reply is an error, never
// a delivery with an empty key or body.
func takenDeliveries(rows []any) ([]takenDelivery, error) {
	const script = "hook_claim"
	if len(rows)%3 != 0 {
		return nil, &store.ReplyError{Script: script, Field: "rows", Reply: rows, Want: "three values a delivery"}
	}
	out := make([]takenDelivery, len(rows)/3)
	for i := range out {
		key, err := store.Str(script, rows, 3*i, "key")
		if err != nil {
			return nil, err
		}
		attempts, err := store.Int(script, rows, 3*i+1, "attempts")
		if err != nil {
			return nil, err
		}
		body, err := store.Str(script, rows, 3*i+2, "body")
		if err != nil {
			return nil, err
		}
		out[i] = takenDelivery{key: key, attempts: int(attempts), body: body}
	}
	return out, nil
}

// sendHook makes one delivery's request and answers its ack.
func (d *Dispatcher) sendHook(ctx context.Context, s Subscription, key string, attempt int, body []byte) store.HookAckItem {
	id := deliveryID(key)
	a := HookAttempt{Subscription: s.ID, ID: id, Attempt: attempt}
	ack := store.HookAckItem{Key: key, Attempts: attempt}
	final, retry := d.postHook(ctx, s, id, attempt, body, &a)
	switch {
	case a.Error == "":
		a.Outcome, ack.Outcome = "delivered", "ok"
	case final || attempt >= HookMaxAttempts:
		a.Outcome, ack.Outcome = "dead", "dead"
		dd, _ := json.Marshal(DeadDelivery{ID: id, Event: body, Attempts: attempt, Error: a.Error, DiedAt: d.clock.Now().UTC()})
		ack.Dead = string(dd)
	default:
		a.Outcome, ack.Outcome = "retry", "retry"
		if retry == 0 {
			retry = hookBackoff(attempt)
		}
		ack.DelayMs = max(retry.Milliseconds(), 1)
	}
	d.metrics.hooks.WithLabelValues(a.Outcome).Inc()
	if d.cfg.OnHookAttempt != nil {
		d.cfg.OnHookAttempt(a)
	}
	return ack
}

// postHook makes one attempt's request, recording in a the receiver's
// status or the error that ended it. final: no retry changes the outcome;
// retry: the wait the receiver asked for (0: none).
func (d *Dispatcher) postHook(ctx context.Context, s Subscription, id string, attempt int, body []byte, a *HookAttempt) (final bool, retry time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := d.hookRequest(rctx, s, id, attempt, body)
	if err != nil {
		a.Error = err.Error()
		return true, 0
	}
	resp, err := d.http.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, ErrRefused):
			a.Error, final = "POST "+s.URL+": "+unwrapRefused(err), true
		case ctx.Err() != nil:
			a.Error = "canceled: " + context.Cause(ctx).Error()
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			a.Error = fmt.Sprintf("timed out after %s (the subscription's timeout)", s.Timeout)
		default:
			a.Error = err.Error()
		}
		return final, 0
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResultBytes))
	_ = resp.Body.Close()
	a.Status = resp.StatusCode
	if a.Status >= 200 && a.Status < 300 {
		return false, 0
	}
	a.Error = fmt.Sprintf("HTTP %d %s", a.Status, http.StatusText(a.Status))
	if len(snippet) > 0 {
		a.Error += ": " + strings.ToValidUTF8(string(snippet), "?")
	}
	// As for a push request: another 4xx is the receiver refusing this
	// delivery, which no retry changes.
	final = a.Status >= 400 && a.Status < 500 && a.Status != http.StatusRequestTimeout && a.Status != http.StatusTooEarly &&
		a.Status != http.StatusTooManyRequests
	if a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable {
		if after, ok := retryAfter(resp.Header.Get("Retry-After"), d.clock.Now()); ok {
			retry = after
		}
	}
	return final, retry
}

// hookRequest is one attempt's signed request: the event as its body,
// the subscription's headers, the Standard Webhooks headers and
// chronoq's own.
func (d *Dispatcher) hookRequest(ctx context.Context, s Subscription, id string, attempt int, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	var ev HookEvent
	_ = json.Unmarshal(body, &ev)
	ts := d.clock.Now()
	sig, err := Sign(s.Secrets, id, ts, body)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chronoq-dispatch")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderQueue, ev.Data.Queue)
	req.Header.Set(HeaderJobID, ev.Data.ID)
	req.Header.Set(HeaderEvent, ev.Type)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	return req, nil
}

// hookBackoff is the wait after a delivery's attempt-th failed attempt:
// HookBackoffInitial doubling, at most HookBackoffMax.
func hookBackoff(attempt int) time.Duration {
	d := HookBackoffInitial
	for i := 1; i < attempt && d < HookBackoffMax; i++ {
		d *= 2
	}
	return min(d, HookBackoffMax)
}
