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
	"slices"
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

// clickLive clicks the element sel in the page's own script, on the
// element as it is then, once there is one (within 5 s). The live lists
// draw themselves again as they change: a mouse click lands where the
// element was when chromedp found it, or on a node gone since ("Could not
// find node with given id").
func (b *browser) clickLive(sel string) {
	b.t.Helper()
	b.waitFor("an element to click: "+sel,
		fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel),
		5*time.Second)
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

// num evaluates a number.
func (b *browser) num(expr string) float64 {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](expr))
	require.NoError(b.t, err)
	return v
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
	console := watchConsole(b)

	// Sign in: the token sets the cookie and leaves the address bar.
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	require.Equal(t, s.base+"/", b.eval(`location.href`))
	require.Empty(t, b.eval(`document.cookie`)) // HttpOnly
	b.waitFor("the demo panel", `!document.getElementById("demo-panel").hidden`, 5*time.Second)

	// A batch due in an hour: scheduled, soonest first. (An hour, so that
	// no row leaves the scheduled tab while the test opens it, however slow
	// the machine.)
	b.do(b.set("demo-count", "4"), b.set("demo-when", "delay"), b.set("demo-delay", "1h"), b.click("#demo-batch"))
	b.waitFor("4 scheduled jobs", rows("scheduled", "===", 4), 10*time.Second)
	require.Equal(t, "demo", b.eval(`document.getElementById("queue-select").value`))
	// Open one: its page shows its payload; run it now from there; back to
	// the list.
	b.clickLive("#jobs tr.job")
	b.waitFor("the job's page", `!document.querySelector("[data-view=job]").hidden && document.getElementById("detail-payload").textContent.includes("user")`, 5*time.Second)
	require.Contains(t, b.eval(`location.hash`), "#/queues/demo/jobs/")
	b.waitFor("the scheduled job's status", `document.getElementById("job-status").dataset.status === "scheduled"`, 5*time.Second)
	b.do(b.click(`#detail-actions button[data-act="run now"]`))
	b.waitFor("the job run now", `document.getElementById("job-status").dataset.status === "pending"`, 5*time.Second)
	b.do(b.click("#job-back"))
	b.waitFor("the other jobs again", `!document.querySelector("[data-view=queues]").hidden && `+rows("scheduled", "===", 3), 5*time.Second)
	// The other three, run now from their rows (with clickLive, as every
	// click on a row of a live list).
	for left := 2; left >= 0; left-- {
		b.clickLive(`#jobs tr.job[data-status=scheduled] button[data-act="run now"]`)
		b.waitFor("a scheduled job run now", rows("scheduled", "===", left), 5*time.Second)
	}
	// And two due in a second, which the promoter moves when due.
	b.do(b.set("demo-count", "2"), b.set("demo-delay", "1s"), b.click("#demo-batch"))

	// Workers: the jobs are completed.
	b.do(b.set("demo-size", "2"), b.set("demo-latency", "50ms"), b.set("demo-fail", "0"), b.set("demo-hang", "0"), b.click("#demo-apply"))
	b.waitFor("2 workers", text("demo-running", "2"), 5*time.Second)
	b.do(b.click(`#tabs button[data-tab=completed]`))
	b.waitFor("6 completed jobs", rows("completed", "===", 6), 20*time.Second)
	b.waitFor("the throughput chart", `!!document.querySelector("#chart-throughput path.series[data-queue=demo]") && !!document.querySelector("#chart-lateness path.series[data-queue=demo]")`, 5*time.Second)

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
	b.clickLive(`#jobs tr.job[data-id="` + id + `"]`)
	b.waitFor("the dead job's error", `document.getElementById("detail-error").textContent.includes("simulated")`, 5*time.Second)
	b.waitFor("the dead job's status", `document.getElementById("job-status").dataset.status === "dead"`, 5*time.Second)
	b.do(b.click(`#detail-actions button[data-act=retry]`))
	b.waitFor("the retried job pending", `document.getElementById("job-status").dataset.status === "pending"`, 5*time.Second)
	b.do(b.click("#job-back"))
	b.waitFor("the retried job to leave the dead set", `!document.querySelector("[data-view=queues]").hidden && !document.querySelector('#jobs tr.job[data-id="`+id+`"]')`, 5*time.Second)
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

	console.none(t, true)

	// Signed out: the page, and every action, are refused.
	_, err = chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return chromedp.Void{}, err
	})
	require.NoError(t, err)
	// The page is the sign-in form; the API refuses every action.
	b.do(chromedp.Navigate(s.base + "/"))
	body := b.eval(`document.body.innerText`)
	require.Contains(t, body, "needs its API token")
	require.NotContains(t, body, "Queues")
	require.Equal(t, "true", b.eval(`String(!!document.querySelector("form#signin input[name=token][type=password]"))`))
	status := b.eval(`fetch("/v1/demo/batch", {method: "POST", body: "{}"}).then(r => String(r.status))`)
	require.Equal(t, "401", status)
	status = b.eval(`fetch("/v1/queues").then(r => String(r.status))`)
	require.Equal(t, "401", status)
	b.do(chromedp.Navigate(s.base + "/?token=wrong"))
	require.Contains(t, b.eval(`document.body.innerText`), "That token is not this server's.")
	require.False(t, strings.Contains(b.eval(`location.href`), "tok3n"))
	// The form signs in: the dashboard, live, the token out of the address.
	b.do(b.set("token", "tok3n"), b.click("#signin button"), chromedp.WaitReady(chromedp.CSS("#live")))
	b.waitFor("the page to be live after the sign-in form", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	require.Equal(t, s.base+"/", b.eval(`location.href`))
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
	b.clickLive("#jobs tr.job")
	b.waitFor("two deliveries", `document.querySelectorAll("#detail-deliveries tr.delivery").length === 2`, 5*time.Second)
	require.Equal(t, "429,200", b.eval(`[...document.querySelectorAll("#detail-deliveries tr.delivery")].map(r => r.dataset.status).join()`))
	require.Contains(t, b.eval(`document.getElementById("detail-deliveries").innerText`), "retry_after")
	require.Contains(t, b.eval(`document.getElementById("detail-deliveries").innerText`), "completed")
	b.screenshot("dashboard-push.png")
}

// value is a predicate: the input id holds want.
func value(id, want string) string {
	return fmt.Sprintf(`document.getElementById(%q).value === %q`, id, want)
}

// liveState is a predicate: the page's event stream is in state ("live",
// "down" or "connecting").
func liveState(state string) string {
	return fmt.Sprintf(`document.getElementById("live").dataset.state === %q`, state)
}

// pending is a predicate: the queues table shows n pending jobs in q.
func pending(q string, n int) string {
	return fmt.Sprintf(`(document.querySelector('#queues tr.q[data-queue=%q] .n-pending') || {}).textContent === "%d"`, q, n)
}

// TestDashboardLive drives the dashboard of `chronoq demo` in a real
// headless Chromium and checks what the event stream (GET /v1/events)
// brings: the demo pool's form shows the pool's current settings; an
// enqueue shows up through its event, and the page polls nothing; a job's
// page (a deep link) shows the job and its status changing live; the
// charts are of a readable size, with axes and a legend, and fit a narrow
// window; the stream refuses a wrong credential; and when the server goes
// away the page says so, shows a server that refuses its session as
// signed out, and reconnects by itself (reading again what it missed).
func TestDashboardLive(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	args := []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h"}
	s := startServeAs(t, "demo", slices.Concat(args, []string{"--workers", "3"}), nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	console := watchConsole(b)
	post := func(srv *served, path, body string) map[string]any { return srv.post(t, path, body) }

	// The pool's settings, changed before the page opens (and 3 workers
	// from --workers): the form shows them, not defaults of its own.
	post(s, "/v1/demo/pool", `{"latency":"120ms","fail_rate":0.25,"hang_rate":0.05}`)
	post(s, "/v1/jobs", `{"queue":"live","kind":"k"}`)
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the stream live", liveState("live"), 10*time.Second)
	b.waitFor("the pool's settings in the form", value("demo-size", "3")+" && "+value("demo-latency", "120ms")+" && "+
		value("demo-fail", "0.25")+" && "+value("demo-hang", "0.05"), 5*time.Second)
	// Changed from the page: a new page shows the new settings.
	b.do(b.set("demo-size", "0"), b.set("demo-latency", "10ms"), b.set("demo-fail", "0"), b.set("demo-hang", "0"), b.click("#demo-apply"))
	b.waitFor("no workers", text("demo-running", "0"), 10*time.Second)
	b.do(chromedp.Navigate(s.base + "/"))
	b.waitFor("the new settings in a new page's form", value("demo-size", "0")+" && "+value("demo-latency", "10ms")+" && "+
		value("demo-fail", "0")+" && "+value("demo-hang", "0"), 10*time.Second)

	// Live, without polling: from now on the test sees every request the
	// page makes. An enqueue by someone else shows up through its event,
	// and no request reads the queues again.
	b.waitFor("the page read once", liveState("live")+` && Number(document.getElementById("live").dataset.resyncs) >= 1 && `+pending("live", 1), 10*time.Second)
	b.eval(`window.__paths = []; new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__paths.push(new URL(e.name).pathname) }).observe({type: "resource"}); "ok"`)
	resyncs0 := b.eval(`document.getElementById("live").dataset.resyncs`)
	events0 := b.eval(`document.getElementById("live").dataset.events`)
	post(s, "/v1/jobs", `{"queue":"live","kind":"k"}`)
	b.waitFor("the enqueue, through its event", pending("live", 2)+` && Number(document.getElementById("live").dataset.events) > `+events0, 10*time.Second)
	// A page that polls reads the queues within a second or two: give it 3
	// (a bounded wait, as only time can show that nothing happens). Only
	// the full re-read (every 30 s) may read them, at most once here.
	readsBeyondResyncs := `window.__paths.filter((p) => p === "/v1/queues").length - (Number(document.getElementById("live").dataset.resyncs) - ` + resyncs0 + `)`
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](readsBeyondResyncs+` > 0`, chromedp.WithPollingTimeout(3*time.Second)))
	require.ErrorIs(t, err, chromedp.ErrPollingTimeout, "the page read the queues beyond its resync: %s", b.eval(`window.__paths.join(" ")`))
	require.Equal(t, "0", b.eval(`String(`+readsBeyondResyncs+`)`))
	require.LessOrEqual(t, b.num(`Number(document.getElementById("live").dataset.resyncs) - `+resyncs0), 1.0)

	// A job's page, opened by its address: its details, then its status as
	// it changes, each change shown from its event.
	j := post(s, "/v1/jobs", `{"queue":"one","kind":"report","payload":{"n":7},"delay":"1h"}`)
	id := j["id"].(string)
	b.eval(`location.hash = "#/queues/one/jobs/` + id + `"; "ok"`)
	b.do(chromedp.Reload()) // the page loads at the job's address
	require.Equal(t, s.base+"/#/queues/one/jobs/"+id, b.eval(`location.href`))
	b.waitFor("the job's page", `document.getElementById("job-status").dataset.status === "scheduled" && document.getElementById("detail-payload").textContent.includes('"n": 7')`, 10*time.Second)
	b.waitFor("the stream live", liveState("live"), 10*time.Second)
	post(s, "/v1/queues/one/jobs/"+id+"/retry", "")
	b.waitFor("pending, live", `document.getElementById("job-status").dataset.status === "pending" && !!document.querySelector("#job-events li[data-type=run_now]")`, 10*time.Second)
	claimed := post(s, "/v1/queues/one/claim", `{"wait":"5s"}`)
	jobs := claimed["jobs"].([]any)
	require.Len(t, jobs, 1)
	b.waitFor("processing, live", `document.getElementById("job-status").dataset.status === "processing"`, 10*time.Second)
	post(s, "/v1/queues/one/jobs/"+id+"/complete", `{"token":"`+jobs[0].(map[string]any)["token"].(string)+`","result":{"sent":true}}`)
	b.waitFor("completed, with its result", `document.getElementById("job-status").dataset.status === "completed" && document.getElementById("detail-result").textContent.includes("sent")`, 10*time.Second)
	require.Equal(t, "completed,processing,pending", b.eval(`[...document.querySelectorAll("#job-events li")].map((l) => l.dataset.status).join()`))
	require.Equal(t, "none", b.eval(`getComputedStyle(document.getElementById("detail-resched")).display`), "a completed job cannot be rescheduled")
	b.screenshot("dashboard-job.png")

	// The charts: drawn from the events of demo jobs, readable.
	b.eval(`location.hash = "#/queues"; "ok"`)
	post(s, "/v1/demo/pool", `{"size":2,"latency":"10ms"}`)
	post(s, "/v1/demo/batch", `{"count":10}`)
	b.waitFor("the throughput drawn", `Number((document.querySelector("#chart-throughput svg") || {dataset: {}}).dataset.max) > 0 && !!document.querySelector("#chart-throughput path.series[data-queue=demo]")`, 20*time.Second)
	for _, chart := range []string{"chart-throughput", "chart-lateness"} {
		q := `document.querySelector("#` + chart + ` svg")`
		require.Equal(t, "true", b.eval(`String(`+q+`.getBoundingClientRect().width >= 500 && `+q+`.getBoundingClientRect().height >= 200)`),
			"%s: %s", chart, b.eval(`JSON.stringify(`+q+`.getBoundingClientRect())`))
		require.GreaterOrEqual(t, b.num(`document.querySelectorAll("#`+chart+` text.tick.y").length`), 5.0)
		require.Equal(t, "12px", b.eval(`getComputedStyle(document.querySelector("#`+chart+` text.tick")).fontSize`))
		xs := strings.Split(b.eval(`[...document.querySelectorAll("#`+chart+` text.tick.x")].map((t) => t.textContent).join()`), ",")
		require.GreaterOrEqual(t, len(xs), 4, "%q", xs)
		require.Equal(t, "now", xs[0])
		require.Regexp(t, `^\d+ (s|min) ago$`, xs[len(xs)-1])
		require.NotEmpty(t, b.eval(`document.querySelector("#`+chart+` text.unit").textContent`))
		require.Contains(t, b.eval(`document.querySelector("#`+chart+` .legend").textContent`), "demo")
		require.Contains(t, b.eval(`document.querySelector("#`+chart+` .legend").textContent`), "live")
	}
	b.screenshot("dashboard-live.png")
	// A narrow window: the charts fit it.
	b.do(chromedp.EmulateViewport(480, 900))
	const fitted = `[...document.querySelectorAll("figure.chart .plot > svg")].every((s) => s.width.baseVal.value === s.parentElement.clientWidth && s.getBoundingClientRect().right <= 480)`
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fitted, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("the charts do not fit a narrow window: %v: %s", err, b.eval(`JSON.stringify([innerWidth, ...[...document.querySelectorAll("figure.chart .plot > svg")].map((s) => [s.width.baseVal.value, s.parentElement.clientWidth, s.getBoundingClientRect().right])])`))
	}
	b.screenshot("dashboard-live-narrow.png")

	console.none(t, true)

	// The stream takes the session cookie, and nothing else: a wrong bearer
	// token beside the cookie, or the token in its address, is refused.
	require.Equal(t, "401", b.eval(`fetch("/v1/events", {headers: {Authorization: "Bearer wrong"}}).then((r) => String(r.status))`))
	require.Equal(t, "401", b.eval(`fetch("/v1/events?token=tok3n", {credentials: "omit"}).then((r) => String(r.status))`))

	// The server goes away: the page says so and tries again. A server
	// there with another token refuses the page's session: signed out.
	// Then the server is back: the page reconnects by itself, reads again
	// the job enqueued while it was away, and events flow again.
	addr := strings.TrimPrefix(s.base, "http://")
	s.stop()
	b.waitFor("the stream down", liveState("down")+` && document.getElementById("live").textContent.includes("reconnecting")`, 10*time.Second)
	other := startServeAs(t, "demo", slices.Concat(args, []string{"--listen", addr, "--token", "other"}), nil)
	b.waitFor("signed out", `document.getElementById("live").textContent.includes("signed out") && !document.getElementById("auth").hidden`, 20*time.Second)
	post(other, "/v1/jobs", `{"queue":"live","kind":"k"}`) // no event reaches the page
	other.stop()
	back := startServeAs(t, "demo", slices.Concat(args, []string{"--listen", addr}), nil)
	b.waitFor("live again", liveState("live")+` && document.getElementById("auth").hidden && `+pending("live", 3), 45*time.Second)
	post(back, "/v1/jobs", `{"queue":"live","kind":"k"}`)
	b.waitFor("events again", pending("live", 4), 10*time.Second)
}

// workerIDs is the ids of the workers page's rows, comma-separated.
const workerIDs = `[...document.querySelectorAll("#workers tr.worker")].map((r) => r.dataset.id).join()`

// TestDashboardWorkers drives the workers page (#/workers) of `chronoq
// demo` in a real headless Chromium: the demo pool's simulated workers are
// listed with their host, labels, queue, version, times and the jobs they
// hold (each a link to the job's page); a resize of the pool shows; a hung
// worker stays listed holding its job until its TTL (--worker-ttl 4s)
// lapses, then disappears; more workers than a page are paged; and the
// page stops reading the registry once left.
func TestDashboardWorkers(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "demo", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h",
		"--workers", "2", "--worker-ttl", "4s"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	console := watchConsole(b)
	post := func(path, body string) map[string]any { return s.post(t, path, body) }
	row := func(id string) string { return `document.querySelector('#workers tr.worker[data-id="` + id + `"]')` }
	cell := func(id, class string) string {
		return b.eval(row(id) + `.querySelector("td.` + class + `").textContent`)
	}
	// Slow jobs, so that one is seen held.
	post("/v1/demo/pool", `{"latency":"10s","fail_rate":0,"hang_rate":0}`)

	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the stream live", liveState("live"), 10*time.Second)
	b.do(b.click(`#nav a[data-nav=workers]`))
	require.Equal(t, s.base+"/#/workers", b.eval(`location.href`))
	b.waitFor("the demo's two workers", workerIDs+` === "demo-1,demo-2" && `+text("workers-live", "2"), 10*time.Second)
	host, _ := os.Hostname()
	require.Equal(t, host, cell("demo-1", "w-host"))
	require.Equal(t, "simulated", cell("demo-1", "w-labels"))
	require.Equal(t, "demo", cell("demo-1", "w-queues"))
	require.NotEqual(t, "—", cell("demo-1", "w-version"))
	require.Regexp(t, `^(now|\d+s ago)$`, cell("demo-1", "w-started"))
	require.Regexp(t, `^(now|\d+s ago)$`, cell("demo-1", "w-seen"))
	require.Regexp(t, `^(now|in \ds)$`, cell("demo-1", "w-expires"))
	require.Equal(t, "—", cell("demo-1", "jobs"))
	require.True(t, b.eval(`document.querySelector('#nav a[data-nav=workers]').classList.contains("on") ? "on" : ""`) == "on")

	// A job: the worker holding it shows it, a link to its page.
	id := post("/v1/demo/batch", `{"count":1,"max_attempts":1}`)["ids"].([]any)[0].(string)
	held := `#workers tr.worker a.held[data-id="` + id + `"]`
	b.waitFor("the job held", `!!document.querySelector('`+held+`')`, 10*time.Second)
	require.Equal(t, "1", b.eval(`document.querySelector('`+held+`').closest("tr").dataset.jobs`))
	b.screenshot("dashboard-workers.png")
	b.clickLive(held)
	b.waitFor("the job's page, with its worker", `document.getElementById("job-status").dataset.status === "processing" && `+
		`!document.getElementById("job-holder").hidden`, 5*time.Second)
	require.Equal(t, s.base+"/#/queues/demo/jobs/"+id, b.eval(`location.href`))
	holder := b.eval(`document.getElementById("job-holder").dataset.worker`)
	require.Contains(t, []string{"demo-1", "demo-2"}, holder)
	require.Equal(t, "held by "+holder+" on "+host, b.eval(`document.getElementById("job-holder").textContent`))
	b.do(chromedp.NavigateBack())
	b.waitFor("the workers again", `!document.querySelector("[data-view=workers]").hidden && `+workerIDs+` === "demo-1,demo-2"`, 10*time.Second)

	// A resize shows: up to 3, then down to 1 (the stopped ones leave the
	// registry at once).
	post("/v1/demo/pool", `{"size":3}`)
	b.waitFor("three workers", workerIDs+` === "demo-1,demo-2,demo-3" && `+text("workers-live", "3"), 10*time.Second)
	post("/v1/demo/pool", `{"size":1,"latency":"10ms"}`)
	b.waitFor("one worker", workerIDs+` === "demo-1" && `+text("workers-live", "1"), 10*time.Second)
	require.Eventually(t, func() bool {
		_, q := s.do(t, http.MethodGet, "/v1/queues/demo", "")
		return q["completed_total"] == float64(1)
	}, 30*time.Second, 50*time.Millisecond, "the first job done")

	// A hang: demo-1 crashed holding its job; it stays listed with it, its
	// last sighting ageing, until its TTL (4 s) lapses; its replacement is
	// demo-1.2.
	post("/v1/demo/pool", `{"hang_rate":1}`)
	id = post("/v1/demo/batch", `{"count":1}`)["ids"].([]any)[0].(string)
	b.waitFor("the hung worker with its job, and its replacement", workerIDs+` === "demo-1,demo-1.2" && !!`+row("demo-1")+
		`.querySelector('a.held[data-id="`+id+`"]')`, 10*time.Second)
	b.waitFor("the hung worker expired", workerIDs+` === "demo-1.2" && `+text("workers-live", "1"), 20*time.Second)

	// More workers than a page (50): paged.
	for i := range 50 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, fmt.Sprintf("%s/v1/workers/http-%02d", s.base, i),
			strings.NewReader(`{"host":"box-2","ttl":"1h","labels":["eu","gpu"]}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok3n")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	b.waitFor("the first page", text("workers-live", "51")+` && document.querySelectorAll("#workers tr.worker").length === 50 && !document.getElementById("workers-next").hidden`, 10*time.Second)
	require.Equal(t, "eugpu", cell("http-00", "w-labels"))
	require.Equal(t, "true", b.eval(`String(document.getElementById("workers-first").hidden)`))
	b.do(b.click("#workers-next"))
	b.waitFor("the second page", workerIDs+` === "http-49" && !document.getElementById("workers-first").hidden && document.getElementById("workers-next").hidden`, 10*time.Second)
	require.Equal(t, s.base+"/#/workers/after/http-48", b.eval(`location.href`))
	b.do(b.click("#workers-first"))
	b.waitFor("the first page again", `document.querySelectorAll("#workers tr.worker").length === 50`, 10*time.Second)

	// Left, the page reads the registry no more: watched for longer than
	// its interval (5 s; a bounded wait, as only time can show that
	// nothing happens). A read already in flight when the page was left
	// ends after it and is no new read: only reads started later count.
	b.eval(`location.hash = "#/queues"; window.__paths = []; const left = performance.now(); new PerformanceObserver((l) => { for (const e of l.getEntries()) if (e.startTime > left) window.__paths.push(new URL(e.name).pathname) }).observe({type: "resource"}); "ok"`)
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`window.__paths.some((p) => p.startsWith("/v1/workers"))`, chromedp.WithPollingTimeout(6*time.Second)))
	require.ErrorIs(t, err, chromedp.ErrPollingTimeout, "the page read the workers after it was left: %s", b.eval(`window.__paths.join(" ")`))

	console.none(t, false)
}

// TestDashboardJobLogInBrowser: a running demo job's page, in a real
// headless Chromium, shows the job's log lines and progress arriving live
// from the job's own stream; when the server goes away and comes back,
// the stream resumes after the last line shown (no line twice) and the
// job's later lines follow; when the job completes the page shows its
// artifact (collapsible, pretty JSON) and the stream's end with the final
// status. A log past its cap shows its 1000 lines and "truncated" (from
// the stream's log_truncated: the last append added no line), and an
// artifact attached mid-run shows at once (the stream's artifact).
func TestDashboardJobLogInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	args := []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h", "--workers", "0"}
	s := startServeAs(t, "demo", args, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	console := watchConsole(b)
	post := func(srv *served, path, body string) map[string]any { return srv.post(t, path, body) }
	logTotal := func(srv *served, q, id string) float64 {
		t.Helper()
		status, m := srv.do(t, http.MethodGet, "/v1/queues/"+q+"/jobs/"+id+"/logs?limit=1", "")
		require.Equal(t, http.StatusOK, status, "%v", m)
		return m["total"].(float64)
	}
	const (
		lines    = `document.querySelectorAll("#job-log li").length`
		percent  = `Number(document.getElementById("job-progress").dataset.percent || -1)`
		status   = `document.getElementById("job-status").dataset.status`
		seqs     = `[...document.querySelectorAll("#job-log li")].map((l) => l.dataset.seq).join()`
		streamSt = `document.getElementById("job-stream").dataset.state`
	)

	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the stream live", liveState("live"), 10*time.Second)

	// A thumbnail job and one worker taking 5 s to 15 s over it, in 10 to
	// 20 steps: its page is opened once it has run a step.
	id := post(s, "/v1/demo/batch", `{"count":1,"kinds":["thumbnail"]}`)["ids"].([]any)[0].(string)
	post(s, "/v1/demo/pool", `{"size":1,"latency":"10s","fail_rate":0,"hang_rate":0}`)
	require.Eventually(t, func() bool { return logTotal(s, "demo", id) >= 2 }, 10*time.Second, 20*time.Millisecond)
	b.eval(`location.hash = "#/queues/demo/jobs/` + id + `"; "ok"`)
	b.waitFor("the running job's log and progress", status+` === "processing" && `+lines+` >= 2 && `+percent+` > 0 && `+percent+` < 100 && `+streamSt+` === "live"`, 10*time.Second)
	require.Equal(t, "claimed by demo-1 (attempt 1 of 3)", b.eval(`document.querySelector("#job-log li .text").textContent`))
	n0, p0 := b.num(lines), b.num(percent)
	b.waitFor("more lines and progress, live", fmt.Sprintf(`%s > %v && %s > %v && %s === "processing"`, lines, n0, percent, p0, status), 10*time.Second)
	require.Regexp(t, `^\w.* \(\d+ of \d+\)$`, b.eval(`document.getElementById("job-progress-msg").textContent`))
	require.Regexp(t, `^\d+(\.\d)?%$`, b.eval(`document.getElementById("job-progress-pct").textContent`))
	require.Regexp(t, `^\d\d:\d\d:\d\d\.\d\d\d$`, b.eval(`document.querySelector("#job-log li time").textContent`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("no-job-artifacts").hidden === false)`), "no artifact before completion")

	// The worker stops mid-job: the job is released (a last line), pending.
	post(s, "/v1/demo/pool", `{"size":0}`)
	b.waitFor("the job released", status+` === "pending" && document.querySelector("#job-log li:last-child .text").textContent.includes("released")`, 10*time.Second)
	shown := b.eval(seqs)

	console.none(t, true)

	// The server goes away: the job's stream is down. Back (its workers at
	// 0), then a worker taking 0.5 s to 1.5 s: the stream resumes, the
	// lines shown are not shown again, the new ones follow.
	addr := strings.TrimPrefix(s.base, "http://")
	s.stop()
	b.waitFor("the job's stream down", streamSt+` === "down"`, 10*time.Second)
	back := startServeAs(t, "demo", slices.Concat(args, []string{"--listen", addr}), nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(back.logs)
		}
	})
	b.waitFor("the job's stream live again", streamSt+` === "live"`, 45*time.Second)
	require.Equal(t, shown, b.eval(seqs), "nothing new, nothing twice")
	post(back, "/v1/demo/pool", `{"size":1,"latency":"1s","fail_rate":0,"hang_rate":0}`)
	b.waitFor("the job completed, its stream ended", status+` === "completed" && `+streamSt+` === "ended" && `+
		text("job-stream", "stream ended: job completed"), 20*time.Second)
	b.waitFor("its artifact", `!!document.querySelector('#job-artifacts details.artifact[data-name=summary][open] pre')`, 10*time.Second)
	total := logTotal(back, "demo", id)
	b.waitFor("every line", fmt.Sprintf(`%s === %v`, lines, total), 5*time.Second)
	want := make([]string, int(total))
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	require.Equal(t, strings.Join(want, ","), b.eval(seqs), "each line once, in order")
	require.Contains(t, b.eval(`document.getElementById("job-log").innerText`), "claimed by demo-1 (attempt 2 of 3)")
	require.Regexp(t, `^done in `, b.eval(`document.querySelector("#job-log li:last-child .text").textContent`))
	require.Equal(t, "100", b.eval(`document.getElementById("job-progress").dataset.percent`))
	require.Equal(t, "100%", b.eval(`document.getElementById("job-progress-pct").textContent`))
	require.Equal(t, fmt.Sprintf("%v lines", total), b.eval(`document.getElementById("job-log-count").textContent`))
	art := b.eval(`document.querySelector("#job-artifacts details[data-name=summary] pre").textContent`)
	require.Contains(t, art, "\n  \"kind\": \"thumbnail\"", "pretty JSON")
	require.Contains(t, art, "thumbs/uploads/img_")
	b.screenshot("dashboard-job-log.png")
	// Collapsible.
	b.do(b.click(`#job-artifacts details[data-name=summary] summary`))
	require.Equal(t, "false", b.eval(`String(document.querySelector("#job-artifacts details[data-name=summary]").open)`))

	// A long log, past its cap: 1100 lines appended, 1000 kept. Its page
	// shows them, following them while the box is at its bottom, not when
	// scrolled up, and "truncated"; the job's completion ends its stream.
	long := post(back, "/v1/jobs", `{"queue":"long","kind":"k"}`)["id"].(string)
	token := post(back, "/v1/queues/long/claim", `{"wait":"5s"}`)["jobs"].([]any)[0].(map[string]any)["token"].(string)
	appendBatch := func(batch int) {
		ls := make([]string, 100)
		for i := range ls {
			ls[i] = strconv.Quote(fmt.Sprintf("line %d", batch*100+i+1))
		}
		post(back, "/v1/queues/long/jobs/"+long+"/logs", `{"token":"`+token+`","lines":[`+strings.Join(ls, ",")+`]}`)
	}
	const (
		scrolls  = `(() => { const l = document.getElementById("job-log"); return l.scrollHeight > l.clientHeight })()`
		atBottom = `(() => { const l = document.getElementById("job-log"); return l.scrollTop + l.clientHeight >= l.scrollHeight - 8 })()`
	)
	appendBatch(0)
	b.eval(`location.hash = "#/queues/long/jobs/` + long + `"; "ok"`)
	b.waitFor("100 lines", lines+` === 100`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(`+scrolls+` && `+atBottom+`)`), "the box scrolls, at its bottom")
	appendBatch(1)
	b.waitFor("200 lines", lines+` === 200`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(`+atBottom+`)`), "followed")
	b.eval(`document.getElementById("job-log").scrollTop = 0; "ok"`)
	appendBatch(2)
	b.waitFor("300 lines", lines+` === 300`, 10*time.Second)
	require.Equal(t, "0", b.eval(`String(document.getElementById("job-log").scrollTop)`), "scrolled up: left there")
	require.Equal(t, "true", b.eval(`String(document.getElementById("job-log-truncated").hidden)`))
	b.eval(`const l = document.getElementById("job-log"); l.scrollTop = l.scrollHeight; "ok"`)
	for batch := 3; batch < 11; batch++ {
		appendBatch(batch)
	}
	b.waitFor("1000 lines, truncated", lines+` === 1000 && !document.getElementById("job-log-truncated").hidden && `+
		text("job-log-count", "1000 lines")+` && `+atBottom, 20*time.Second)
	require.Equal(t, "line 1000", b.eval(`document.querySelector("#job-log li:last-child .text").textContent`))
	// An artifact attached mid-run shows at once, from the job's stream.
	code, m := back.do(t, http.MethodPut, "/v1/queues/long/jobs/"+long+"/artifacts/mid", `{"token":"`+token+`","value":{"at":"mid-run"}}`)
	require.Equal(t, http.StatusOK, code, "%v", m)
	b.waitFor("the artifact attached mid-run", status+` === "processing" && `+
		`(document.querySelector("#job-artifacts details[data-name=mid] pre") || {}).textContent === '{\n  "at": "mid-run"\n}'`, 10*time.Second)
	post(back, "/v1/queues/long/jobs/"+long+"/complete", `{"token":"`+token+`","artifacts":{"n":{"lines":1000}}}`)
	b.waitFor("the long job completed, its stream ended", status+` === "completed" && `+text("job-stream", "stream ended: job completed")+
		` && !!document.querySelector("#job-artifacts details[data-name=n]")`, 10*time.Second)
	require.EqualValues(t, 1000, b.num(lines))
	require.Equal(t, "mid,n", b.eval(`[...document.querySelectorAll("#job-artifacts details")].map((d) => d.dataset.name).join()`), "in name order")
	b.screenshot("dashboard-job-long-log.png")
}

// TestDashboardWorkflow: a workflow's graph in a real headless Chromium.
// The demo panel starts the sample fan-out/fan-in (fetch, 6 parts, merge,
// notify) and opens its page: every node is a box in its column (by
// depth), every dependency an edge, each node a link to its job's page.
// The nodes move live from the event stream, waiting, then pending and
// processing, then completed, and the workflow ends completed. The list
// shows it. A second one, canceled while it runs, shows its nodes
// canceled; its retry brings them back and it completes. An unknown
// workflow shows as such.
func TestDashboardWorkflow(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "demo", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--reclaim-interval", "1h", "--workers", "0"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	console := watchConsole(b)
	post := func(path, body string) map[string]any { return s.post(t, path, body) }
	const (
		wfStatus = `document.getElementById("wf-status").dataset.status`
		nodes    = `[...document.querySelectorAll("#wf-graph a.wf-node")]`
	)
	node := func(name string) string {
		return `document.querySelector('#wf-graph a.wf-node[data-name="` + name + `"]')`
	}
	statuses := func() string {
		return b.eval(nodes + `.map((n) => n.dataset.name + "=" + n.dataset.status).sort().join(" ")`)
	}
	all := func(status string) string {
		return nodes + `.length === 9 && ` + nodes + `.every((n) => n.dataset.status === "` + status + `")`
	}
	// Each node's statuses as the page showed them, in order: every change
	// of a box's data-status, seen by a MutationObserver.
	const record = `window.__seen = {}; new MutationObserver((ms) => { for (const m of ms) { const n = m.target;
		if (!n.classList || !n.classList.contains("wf-node")) continue;
		const l = window.__seen[n.dataset.name] = window.__seen[n.dataset.name] || [];
		if (l[l.length - 1] !== n.dataset.status) l.push(n.dataset.status); } })
		.observe(document.getElementById("wf-graph"), {subtree: true, attributes: true, attributeFilter: ["data-status"]}); "ok"`
	seen := func(name string) []string {
		return strings.Split(b.eval(`(window.__seen[`+strconv.Quote(name)+`] || []).join()`), ",")
	}

	// No workers yet, none failing, jobs of 0.2 s to 0.6 s.
	post("/v1/demo/pool", `{"size":0,"latency":"400ms","fail_rate":0,"hang_rate":0}`)
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the stream live", liveState("live"), 10*time.Second)
	b.waitFor("the demo panel", `!document.getElementById("demo-panel").hidden`, 5*time.Second)
	b.eval(record)

	// Started from the demo panel: its page opens, with the graph.
	b.do(b.click("#demo-workflow"))
	b.waitFor("the workflow's graph", `location.hash.startsWith("#/workflows/") && !document.querySelector("[data-view=workflow]").hidden && `+
		nodes+`.length === 9 && `+wfStatus+` === "running"`, 10*time.Second)
	id := strings.TrimPrefix(b.eval(`location.hash`), "#/workflows/")
	require.Equal(t, id, b.eval(`document.getElementById("wf-id").textContent`))
	require.True(t, b.eval(`document.querySelector("#nav a[data-nav=workflows]").classList.contains("on") ? "on" : ""`) == "on")
	status, w := s.do(t, http.MethodGet, "/v1/workflows/"+id, "")
	require.Equal(t, http.StatusOK, status)
	// Every node links to its job's page, every dependency is an edge.
	var wantEdges []string
	for _, n := range w["nodes"].([]any) {
		n := n.(map[string]any)
		name := n["name"].(string)
		require.Equal(t, "#/queues/demo/jobs/"+n["job_id"].(string), b.eval(node(name)+`.getAttribute("href")`), name)
		for _, p := range n["depends_on"].([]any) {
			wantEdges = append(wantEdges, p.(string)+">"+name)
		}
	}
	slices.Sort(wantEdges)
	require.Len(t, wantEdges, 13)
	require.Equal(t, strings.Join(wantEdges, " "), b.eval(`[...document.querySelectorAll("#wf-graph path.wf-edge")].map((e) => e.dataset.from + ">" + e.dataset.to).sort().join(" ")`))
	// In columns by depth, left to right; the parts one above the other,
	// not overlapping; the graph fits its box's width.
	x := func(name string) float64 { return b.num(node(name) + `.getBoundingClientRect().x`) }
	require.Less(t, x("fetch"), x("part-1"))
	for i := 2; i <= 6; i++ {
		require.Equal(t, x("part-1"), x(fmt.Sprintf("part-%d", i)))
	}
	require.Less(t, x("part-1"), x("merge"))
	require.Less(t, x("merge"), x("notify"))
	require.Equal(t, "true", b.eval(`String((() => { const r = [1,2,3,4,5,6].map((i) => document.querySelector('#wf-graph a.wf-node[data-name="part-' + i + '"]').getBoundingClientRect()).sort((a, b) => a.y - b.y);
		return r.every((b, i) => i === 0 || b.top >= r[i - 1].bottom); })())`), "the parts overlap")
	require.Equal(t, "true", b.eval(`String(document.getElementById("wf-svg").getBoundingClientRect().width <= document.getElementById("wf-graph-box").clientWidth)`))
	// Before any worker: fetch is pending, the rest waiting.
	b.waitFor("fetch pending, the rest waiting", node("fetch")+`.dataset.status === "pending" && `+nodes+`.filter((n) => n.dataset.status === "waiting").length === 8`, 5*time.Second)
	require.Contains(t, b.eval(node("fetch")+`.textContent`), "demo · pending")
	require.Equal(t, "false", b.eval(`String(document.getElementById("wf-cancel").hidden)`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("wf-retry").hidden)`))

	// Two workers: the nodes move, live, to the end.
	post("/v1/demo/pool", `{"size":2}`)
	b.waitFor("fetch processing or done", `["processing", "completed"].includes(`+node("fetch")+`.dataset.status)`, 10*time.Second)
	b.waitFor("every node completed, the workflow too", all("completed")+` && `+wfStatus+` === "completed"`, 30*time.Second)
	for _, name := range []string{"fetch", "part-1", "part-2", "part-3", "part-4", "part-5", "part-6", "merge", "notify"} {
		got := seen(name)
		first := "waiting"
		if name == "fetch" {
			first = "pending"
		}
		require.Equal(t, first, got[0], "%s: %v", name, got)
		require.Contains(t, got, "processing", "%s: %v", name, got)
		require.Equal(t, "completed", got[len(got)-1], "%s: %v", name, got)
	}
	require.Equal(t, "true", b.eval(`String([...document.querySelectorAll("#wf-graph path.wf-edge")].every((e) => e.dataset.status === "completed"))`))
	b.waitFor("no cancel button", `document.getElementById("wf-cancel").hidden`, 5*time.Second)
	require.Regexp(t, `^attempts 1 · took \d`, b.eval(node("merge")+`.querySelector(".wf-time").textContent`))
	require.Equal(t, "9", b.eval(`String(document.querySelectorAll("#wf-nodes tr.wf-node-row[data-status=completed]").length)`))
	b.screenshot("dashboard-workflow.png")

	// The list, from the header: the workflow, completed, 9 nodes.
	b.do(b.click(`#nav a[data-nav=workflows]`))
	row := `document.querySelector('#workflows tr.wf[data-id="` + id + `"]')`
	b.waitFor("the workflow in the list", `!!`+row+` && `+row+`.dataset.status === "completed"`, 10*time.Second)
	require.Equal(t, "9", b.eval(row+`.querySelector(".wf-n").textContent`))
	require.Equal(t, "completed 9", b.eval(row+`.querySelector(".wf-counts").textContent`))

	// A second one, canceled while it runs: its nodes canceled.
	post("/v1/demo/pool", `{"size":0}`)
	require.Eventually(t, func() bool {
		_, d := s.do(t, http.MethodGet, "/v1/demo", "")
		return d["running"] == float64(0)
	}, 10*time.Second, 20*time.Millisecond, "the workers stopped")
	b.do(b.click(`#nav a[data-nav=queues]`))
	b.waitFor("the demo panel", `!document.getElementById("demo-panel").hidden && !document.querySelector("[data-view=queues]").hidden`, 5*time.Second)
	b.do(b.click("#demo-workflow"))
	b.waitFor("the second workflow", `location.hash.startsWith("#/workflows/") && location.hash !== "#/workflows/`+id+`" && `+
		node("fetch")+` && `+node("fetch")+`.dataset.status === "pending" && !document.getElementById("wf-cancel").hidden`, 10*time.Second)
	id2 := strings.TrimPrefix(b.eval(`location.hash`), "#/workflows/")
	b.do(b.click("#wf-cancel"))
	b.waitFor("every node canceled", all("canceled")+` && `+wfStatus+` === "canceled" && document.getElementById("wf-cancel").hidden && !document.getElementById("wf-retry").hidden`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(document.getElementById("wf-summary").textContent.includes("canceled 9"))`))
	b.screenshot("dashboard-workflow-canceled.png")
	// Its retry brings them back: fetch pending, the rest waiting; with a
	// worker it completes.
	b.eval(`window.__seen = {}; "ok"`)
	b.do(b.click("#wf-retry"))
	b.waitFor("the nodes back", node("fetch")+`.dataset.status === "pending" && `+nodes+`.filter((n) => n.dataset.status === "waiting").length === 8 && `+
		wfStatus+` === "running" && document.getElementById("wf-retry").hidden`, 10*time.Second)
	post("/v1/demo/pool", `{"size":1}`)
	b.waitFor("the retried workflow completed", all("completed")+` && `+wfStatus+` === "completed"`, 30*time.Second)
	for _, name := range []string{"fetch", "part-1", "part-6", "merge", "notify"} {
		got := seen(name)
		first := []string{"waiting"}
		if name == "fetch" {
			first = append(first, "pending") // waiting again, and released at once: the retry's answer may come before its events
		}
		require.Contains(t, first, got[0], "%s: %v", name, got)
		require.Contains(t, got, "processing", "%s: %v", name, got)
		require.Equal(t, "completed", got[len(got)-1], "%s: %v (%s)", name, got, statuses())
	}

	// A node opens its job's page, which links back to the workflow.
	b.do(b.click(`#wf-graph a.wf-node[data-name="merge"] rect`))
	b.waitFor("the merge job's page", `!document.querySelector("[data-view=job]").hidden && document.getElementById("job-status").dataset.status === "completed" && `+
		`!document.getElementById("job-workflow").hidden`, 10*time.Second)
	require.Equal(t, "merge", b.eval(`document.getElementById("job-workflow-node").textContent`))
	b.do(b.click("#job-workflow-link"))
	b.waitFor("back on the workflow", `location.hash === "#/workflows/`+id2+`" && `+all("completed"), 10*time.Second)

	// The list has both, newest first.
	b.do(b.click(`#nav a[data-nav=workflows]`))
	b.waitFor("both in the list", `[...document.querySelectorAll("#workflows tr.wf")].map((r) => r.dataset.id + ":" + r.dataset.status).join() === "`+
		id2+`:completed,`+id+`:completed"`, 10*time.Second)

	console.none(t, true)

	// An unknown workflow.
	b.eval(`location.hash = "#/workflows/nope"; "ok"`)
	b.waitFor("not found", `!document.getElementById("wf-gone").hidden && `+nodes+`.length === 0 && document.getElementById("wf-cancel").hidden`, 10*time.Second)
}

// consoleWatch records every console error or exception of a page (a CSP
// violation is one) until the test says that the errors from then on are
// made on purpose.
type consoleWatch struct {
	mu       sync.Mutex
	problems []string
	expected bool
}

func watchConsole(b *browser) *consoleWatch {
	c := &consoleWatch{}
	console := chromedp.Console(b.ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			c.mu.Lock()
			if !c.expected && (m.IsException() || m.Type == "error") {
				c.problems = append(c.problems, m.String()+" "+m.URL)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// none fails the test on the errors the page logged so far; with
// onPurpose, the errors from then on are the test's doing and not
// recorded.
func (c *consoleWatch) none(t *testing.T, onPurpose bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.problems, "the page logged errors")
	c.expected = c.expected || onPurpose
}

// post sends a POST to the server and answers its JSON, failing the test
// unless it succeeded.
func (s *served) post(t *testing.T, path, body string) map[string]any {
	t.Helper()
	status, m := s.do(t, http.MethodPost, path, body)
	require.Less(t, status, 300, "%s: %v", path, m)
	return m
}

// TestDashboardLoadingFirst: until the queues are read the page says
// "Loading…", never "No queues yet" while queues exist. The read is held
// back (its URL blocked in the browser) so that the state before the
// first answer lasts; let through, the queue shows and "Loading…" goes.
func TestDashboardLoadingFirst(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "serve", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n"}, nil)
	code, _ := s.do(t, http.MethodPost, "/v1/queues/loading/jobs", `{"kind":"k"}`)
	require.Equal(t, http.StatusCreated, code)

	block := func(on bool) {
		_, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			var ps network.SetBlockedURLsParams
			if on {
				ps.URLPatterns = []*network.BlockPattern{{URLPattern: "*://*:*/v1/queues", Block: true}}
			}
			_, err := cdp.Call(ctx, tg, network.SetBlockedURLs, ps)
			return chromedp.Void{}, err
		})
		require.NoError(t, err)
	}
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	b.waitFor("the queue", `!!document.querySelector("#queues tr.q")`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(document.getElementById("queues-loading").hidden)`))

	block(true)
	b.do(chromedp.Navigate(s.base + "/"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	require.Equal(t, "blocked", b.eval(`fetch("/v1/queues").then(() => "read", () => "blocked")`), "the read is held back")
	require.Equal(t, "false", b.eval(`String(document.getElementById("queues-loading").hidden)`), "Loading… before the first answer")
	require.Equal(t, "true", b.eval(`String(document.getElementById("no-queues").hidden)`), "no \"No queues yet\" before the first answer")

	block(false)
	b.do(chromedp.Navigate(s.base + "/"))
	b.waitFor("the queue", `!!document.querySelector("#queues tr.q")`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(document.getElementById("queues-loading").hidden)`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("no-queues").hidden)`))
}

// TestDashboardWebhooks: the webhooks page, in a real headless Chromium,
// lists the subscriptions with their backlog; a subscription's page lists
// its dead deliveries (here one its receiver refused with a 410, dead at
// once) and sends them again.
func TestDashboardWebhooks(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such hook", http.StatusGone)
	}))
	t.Cleanup(gone.Close)
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0", "--namespace", testutil.Namespace(t),
		"--token", "tok3n", "--reclaim-interval", "1h", "--dispatch-allow", "127.0.0.1"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	sub := s.post(t, "/v1/webhooks", `{"url":"`+gone.URL+`/events","queues":["mail"],"events":["job.canceled"]}`)
	id := sub["id"].(string)
	job := s.post(t, "/v1/queues/mail/jobs", `{"kind":"welcome","delay":"1h"}`)
	jobID := job["id"].(string)
	status, _ := s.do(t, http.MethodDelete, "/v1/queues/mail/jobs/"+jobID, "")
	require.Equal(t, http.StatusOK, status)

	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the stream live", liveState("live"), 10*time.Second)
	b.do(b.click(`#nav a[data-nav=webhooks]`))
	row := `document.querySelector('#webhooks tr.webhook[data-id="` + id + `"]')`
	b.waitFor("the subscription, its delivery dead", `!!`+row+` && `+row+`.querySelector("td.h-dead").textContent === "1"`, 15*time.Second)
	require.Equal(t, gone.URL+"/events", b.eval(row+`.querySelector("td.h-url").textContent`))
	require.Equal(t, "mail", b.eval(row+`.querySelector("td.h-queues").textContent`))
	require.Equal(t, "*", b.eval(row+`.querySelector("td.h-kinds").textContent`))
	require.Equal(t, "job.canceled", b.eval(row+`.querySelector("td.h-events").textContent`))

	b.clickLive(`#webhooks tr.webhook[data-id="` + id + `"] td.h-url`)
	b.waitFor("its dead delivery", `document.querySelectorAll("#webhook-dead tr.dead-delivery").length === 1`, 10*time.Second)
	require.Equal(t, s.base+"/#/webhooks/"+id, b.eval(`location.href`))
	require.Equal(t, "job.canceled", b.eval(`document.querySelector("#webhook-dead td.d-event").textContent`))
	require.Equal(t, "HTTP 410 Gone: no such hook\n", b.eval(`document.querySelector("#webhook-dead td.d-error").textContent`))
	b.screenshot("dashboard-webhooks.png")
	b.do(b.click("#webhook-retry"))
	b.waitFor("sent again", `document.getElementById("msg").textContent.includes("1 pending again")`, 10*time.Second)
}
