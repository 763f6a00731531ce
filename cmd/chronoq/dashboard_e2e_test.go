package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// chromium finds the browser, or skips the test (fails it when
// CHRONOQ_REQUIRE_BROWSER=1, as in CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "chromium not found: install it (Debian: apt-get install chromium, or scripts/ensure-deps.sh --browser) to run the dashboard's browser test"
	if os.Getenv("CHRONOQ_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser drives one headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1600),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute) // the whole test, at most
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return &browser{t: t, ctx: ctx}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...))
}

func (b *browser) set(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS("#"+id), value)
}

func (b *browser) click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}

// waitFor waits, within timeout, until the JavaScript predicate holds; on
// timeout the test fails with what the page shows.
func (b *browser) waitFor(what, predicate string, timeout time.Duration) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](predicate,
		chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](
			`document.getElementById("msg").textContent + " | " + document.getElementById("live").textContent + " | " + document.getElementById("jobs").innerText`))
		b.t.Fatalf("waiting for %s: %v\npage: %s", what, err, state)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err)
	return s
}

// screenshot saves the page in the test's temporary directory and, when
// CHRONOQ_SCREENSHOT_DIR is set, there.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	path := filepath.Join(b.t.TempDir(), name)
	require.NoError(b.t, os.WriteFile(path, shot, 0o644))
	if dir := os.Getenv("CHRONOQ_SCREENSHOT_DIR"); dir != "" {
		require.NoError(b.t, os.MkdirAll(dir, 0o755))
		require.NoError(b.t, os.WriteFile(filepath.Join(dir, name), shot, 0o644))
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}

// rows is a predicate: the jobs table shows n rows of status.
func rows(status string, cmp string, n int) string {
	return fmt.Sprintf(`document.querySelectorAll('#jobs tr.job[data-status=%s]').length %s %d`, status, cmp, n)
}

func text(id, want string) string {
	return fmt.Sprintf(`document.getElementById(%q).textContent === %q`, id, want)
}

// TestDashboardInBrowser drives the dashboard of `chronoq demo` in a real
// headless Chromium: sign in with the token, enqueue a delayed batch and
// watch it scheduled, then completed by the simulated workers; hang
// workers, run a reclaim sweep and watch the jobs back in pending; retry a
// dead job; see the instance's clock offset to Redis's, and on a second
// instance whose clock is 30 s ahead, the same as a warning; and, signed
// out, see the page and its actions refused.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "demo", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	require.Contains(t, s.logs.String(), "demo: open the dashboard")

	// Every console error or exception (a CSP violation is one) fails the
	// test; the signed-out part at the end makes 401s on purpose.
	console := chromedp.Console(b.ctx)
	var mu sync.Mutex
	var problems []string
	signedOut := false
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			if !signedOut && (m.IsException() || m.Type == "error") {
				problems = append(problems, m.String()+" "+m.URL)
			}
			mu.Unlock()
		}
	}()

	// Sign in: the token sets the cookie and leaves the address bar.
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	require.Equal(t, s.base+"/", b.eval(`location.href`))
	require.Empty(t, b.eval(`document.cookie`)) // HttpOnly
	b.waitFor("the demo panel", `!document.getElementById("demo-panel").hidden`, 5*time.Second)

	// A batch due in 2 s: scheduled, soonest first.
	b.do(b.set("demo-count", "4"), b.set("demo-when", "delay"), b.set("demo-delay", "2s"), b.click("#demo-batch"))
	b.waitFor("4 scheduled jobs", rows("scheduled", "===", 4), 10*time.Second)
	require.Equal(t, "demo", b.eval(`document.getElementById("queue-select").value`))
	// Open one: its payload shows.
	b.do(b.click("#jobs tr.job"))
	b.waitFor("the job's detail", `!document.getElementById("detail").hidden && document.getElementById("detail-payload").textContent.includes("user")`, 5*time.Second)

	// Workers: the jobs are promoted when due and completed.
	b.do(b.set("demo-size", "2"), b.set("demo-latency", "50ms"), b.set("demo-fail", "0"), b.set("demo-hang", "0"), b.click("#demo-apply"))
	b.waitFor("2 workers", text("demo-running", "2"), 5*time.Second)
	b.do(b.click(`#tabs button[data-tab=completed]`))
	b.waitFor("4 completed jobs", rows("completed", "===", 4), 20*time.Second)
	b.waitFor("the throughput chart", `document.querySelectorAll("#queues svg.spark polyline").length >= 2`, 5*time.Second)

	// Hung workers: each claims a job and crashes holding it.
	b.do(b.set("demo-hang", "1"), b.click("#demo-apply"))
	b.do(b.set("demo-count", "3"), b.set("demo-when", "now"), b.set("demo-visibility", "1s"), b.click("#demo-batch"))
	b.waitFor("3 hung jobs", text("demo-hung", "3"), 10*time.Second)
	b.do(b.set("demo-size", "0"), b.click("#demo-apply"))
	b.waitFor("the workers to stop", text("demo-running", "0"), 10*time.Second)
	b.do(b.click(`#tabs button[data-tab=processing]`))
	b.waitFor("3 processing jobs", rows("processing", "===", 3), 5*time.Second)
	// The leases (1 s) lapse; a reclaim sweep from the page takes the jobs
	// back. A sweep before the lapse takes nothing: sweep until it did
	// (bounded).
	for i := 0; ; i++ {
		require.Less(t, i, 40, "the reclaim sweeps took nothing back")
		b.do(b.click("#q-reclaim"))
		b.waitFor("a sweep's answer", `document.getElementById("msg").textContent.includes("reclaim")`, 5*time.Second)
		if b.eval(`document.getElementById("count-pending").textContent`) == "3" {
			break
		}
		_, _ = chromedp.Run(b.ctx, chromedp.Poll[bool](`document.getElementById("count-pending").textContent === "3"`,
			chromedp.WithPollingTimeout(250*time.Millisecond)))
	}
	b.do(b.click(`#tabs button[data-tab=pending]`))
	b.waitFor("3 pending jobs", rows("pending", "===", 3), 5*time.Second)

	// A dead job: failing workers, one attempt.
	b.do(b.set("demo-size", "1"), b.set("demo-fail", "1"), b.set("demo-hang", "0"), b.click("#demo-apply"))
	b.do(b.set("demo-count", "1"), b.set("demo-attempts", "1"), b.click("#demo-batch"))
	b.do(b.click(`#tabs button[data-tab=dead]`))
	b.waitFor("a dead job", rows("dead", ">=", 1), 20*time.Second)
	b.do(b.set("demo-size", "0"), b.click("#demo-apply"))
	b.waitFor("the workers to stop", text("demo-running", "0"), 10*time.Second)
	id := b.eval(`document.querySelector('#jobs tr.job[data-status=dead]').dataset.id`)
	b.do(b.click(`#jobs tr.job[data-id="` + id + `"]`))
	b.waitFor("the dead job's error", `document.getElementById("detail-error").textContent.includes("simulated")`, 5*time.Second)
	b.do(b.click(`#jobs tr.job[data-id="` + id + `"] button[data-act=retry]`))
	b.waitFor("the retried job to leave the dead set", `!document.querySelector('#jobs tr.job[data-id="`+id+`"]')`, 5*time.Second)
	b.do(b.click(`#tabs button[data-tab=pending]`))
	b.waitFor("the retried job in pending", `!!document.querySelector('#jobs tr.job[data-status=pending][data-id="`+id+`"]')`, 5*time.Second)

	// Pause and resume the queue.
	b.do(b.click("#q-pause"))
	b.waitFor("the paused badge", `!!document.querySelector("#queues tr.q[data-queue=demo] .badge")`, 5*time.Second)
	b.do(b.click("#q-resume"))
	b.waitFor("no paused badge", `!document.querySelector("#queues tr.q[data-queue=demo] .badge")`, 5*time.Second)

	// This instance's clock against Redis's (GET /v1/status): shown, and
	// no warning, both clocks being this host's.
	const clockText = `document.getElementById("clock").textContent`
	b.waitFor("the clock offset", `!document.getElementById("clock").hidden && /^Redis clock offset [+-]\d+\.\d m?s \(±\d+\.\d m?s\)$/.test(`+clockText+`)`, 5*time.Second)
	require.Equal(t, "false", b.eval(`String(document.getElementById("clock").classList.contains("warn"))`), b.eval(clockText))
	off, err := strconv.ParseFloat(b.eval(`document.getElementById("clock").dataset.offset`), 64)
	require.NoError(t, err)
	require.Less(t, math.Abs(off), 1.0)

	b.screenshot("dashboard.png")

	// A second instance on the same Redis (a demo too, with no workers:
	// the page logs no 404 for /v1/demo), whose host's clock is 30 s
	// ahead: its promoter's first passes tell it Redis's clock is 30 s
	// behind, and its dashboard shows that as a warning.
	skewed := startServeAs(t, "demo", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h"},
		testutil.SkewedClock(30*time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("the skewed instance:\n", skewed.logs)
		}
	})
	b.do(chromedp.Navigate(skewed.base + "/?token=tok3n"))
	b.waitFor("the skewed instance's clock warning", `document.getElementById("clock").classList.contains("warn")`, 15*time.Second)
	require.Regexp(t, `^Redis clock offset -(29|30)\.\d s \(±\d+\.\d m?s\): fix this host's clock \(NTP\)$`, b.eval(clockText))
	require.Equal(t, "rgb(252, 211, 77)", b.eval(`getComputedStyle(document.getElementById("clock")).backgroundColor`), "the warning style")
	b.screenshot("dashboard-clock-warning.png")

	mu.Lock()
	require.Empty(t, problems, "the page logged errors")
	signedOut = true
	mu.Unlock()

	// Signed out: the page, and every action, are refused.
	_, err = chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return chromedp.Void{}, err
	})
	require.NoError(t, err)
	b.do(chromedp.Navigate(s.base + "/"))
	body := b.eval(`document.body.innerText`)
	require.Contains(t, body, "unauthenticated")
	require.NotContains(t, body, "Queues")
	status := b.eval(`fetch("/v1/demo/batch", {method: "POST", body: "{}"}).then(r => String(r.status))`)
	require.Equal(t, "401", status)
	status = b.eval(`fetch("/v1/queues").then(r => String(r.status))`)
	require.Equal(t, "401", status)
	b.do(chromedp.Navigate(s.base + "/?token=wrong"))
	require.Contains(t, b.eval(`document.body.innerText`), "unauthenticated")
	require.False(t, strings.Contains(b.eval(`location.href`), "tok3n"))
}

// TestDashboardPushInBrowser: a push queue with limits, in a real headless
// Chromium. The queue's target and limits show above its jobs; a job the
// receiver refused once (429, Retry-After: 1) and then took shows both
// deliveries, with their response statuses, in the job's detail.
func TestDashboardPushInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	var hits atomic.Int64
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(rc.Close)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "serve", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--dispatch-allow", "127.0.0.1"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	put := func(path, body string) string {
		return b.eval(`fetch(` + strconv.Quote(path) + `, {method: "PUT", headers: {"Content-Type": "application/json"}, body: ` +
			strconv.Quote(body) + `}).then(r => String(r.status))`)
	}
	require.Equal(t, "200", put("/v1/queues/hooks/config", `{"target":{"url":"`+rc.URL+`/hook"},"concurrency":4}`))
	require.Equal(t, "200", put("/v1/queues/hooks/limits", `{"rate":50,"max_in_flight":3}`))
	status := b.eval(`fetch("/v1/jobs", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"queue":"hooks","kind":"ping","payload":{"n":1}}'}).then(r => String(r.status))`)
	require.Equal(t, "201", status)

	b.waitFor("the queue in the list", `!!document.querySelector("#queue-select option[value=hooks]")`, 10*time.Second)
	b.do(b.set("queue-select", "hooks"), chromedp.Evaluate[chromedp.Void](`document.getElementById("queue-select").dispatchEvent(new Event("change"))`))
	b.waitFor("the queue's target", `document.getElementById("queue-target").textContent === "push: POST `+rc.URL+`/hook · timeout 30s · 4 per dispatcher"`, 10*time.Second)
	b.waitFor("the queue's limits", text("queue-limits", "· limits: 50/s (burst 5), at most 3 in flight"), 5*time.Second)

	b.do(b.click(`#tabs button[data-tab=completed]`))
	b.waitFor("the job completed after its retry", rows("completed", "===", 1), 20*time.Second)
	b.do(b.click("#jobs tr.job"))
	b.waitFor("two deliveries", `document.querySelectorAll("#detail-deliveries tr.delivery").length === 2`, 5*time.Second)
	require.Equal(t, "429,200", b.eval(`[...document.querySelectorAll("#detail-deliveries tr.delivery")].map(r => r.dataset.status).join()`))
	require.Contains(t, b.eval(`document.getElementById("detail-deliveries").innerText`), "retry_after")
	require.Contains(t, b.eval(`document.getElementById("detail-deliveries").innerText`), "completed")
	b.screenshot("dashboard-push.png")
}
