package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// flowKeysPage is GET /v1/queues/{queue}/flow/keys's answer.
type flowKeysPage struct {
	Keys  []queue.FlowKeyStats `json:"keys"`
	Total int64                `json:"total"`
}

// flowKeyPage is GET /v1/queues/{queue}/flow/keys/{key}'s answer.
type flowKeyPage struct {
	queue.FlowKeyStats
	PendingJobs    []string `json:"pending_jobs"`
	ProcessingJobs []string `json:"processing_jobs"`
}

// fakeFlow answers the page's reads of queue's flow routes in the
// browser itself (Fetch interception) with answers given as the Go types
// they encode, and records the paths (with their queries) it answered.
type fakeFlow struct {
	mu    sync.Mutex
	paths []string
}

func (f *fakeFlow) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

func (f *fakeFlow) start(t *testing.T, b *browser, q string, answers map[string]any) {
	t.Helper()
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	_, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{
			Patterns: []*fetch.RequestPattern{{URLPattern: "*/v1/queues/" + q + "/flow*"}},
		})
		return chromedp.Void{}, err
	})
	require.NoError(t, err)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			u, err := url.Parse(ev.Request.URL)
			if err != nil {
				return
			}
			path := u.Path
			if u.RawQuery != "" {
				path += "?" + u.RawQuery
			}
			f.mu.Lock()
			f.paths = append(f.paths, path)
			f.mu.Unlock()
			code, body := int64(http.StatusNotFound), []byte(`{"error":{"code":"not_found","message":"no fixture"}}`)
			if a, ok := answers[u.Path]; ok {
				code, body = http.StatusOK, must(json.Marshal(a))
			}
			_, _ = chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
				_, err := cdp.Call(ctx, tg, fetch.FulfillRequest, fetch.FulfillRequestParams{
					RequestID: ev.RequestID, ResponseCode: code, Body: body,
					ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}},
				})
				return chromedp.Void{}, err
			})
		}
	}()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDashboardFlowKeys: the queue page's flow keys panel. A queue whose
// jobs have no flow key shows no panel (the real server's answers). Then,
// with the flow routes answered in the browser from fixtures
// (queue.FlowKeyStats, queue.FlowLimits, encoded as the API does): the
// panel asks for the top 20 keys, shows them in order with their counts
// and overrides, the count of keys with work and the queue's flow
// limits; a key clicked opens #/queues/{queue}/flow/{key} with that key's
// pending and processing jobs (its read asks for 50), each job a link to
// the job's page, which opens it; "close" goes back to the queue.
func TestDashboardFlowKeys(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServeAs(t, "demo", []string{"--redis-url", redisURL, "--namespace", ns, "--token", "tok3n", "--workers", "0"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	code, job := s.do(t, http.MethodPost, "/v1/queues/flows/jobs", `{"kind":"k"}`)
	require.Equal(t, http.StatusCreated, code)
	jobID, _ := job["id"].(string)
	require.NotEmpty(t, jobID)

	// No flow keys: no panel, from a server with the flow routes (an
	// empty page of keys) as from one without them (404: which the
	// browser logs as an error, so the console is watched from the
	// fixtures on).
	b.do(chromedp.Navigate(s.base + "/?token=tok3n"))
	b.waitFor("the page to be live", `document.getElementById("live").textContent.startsWith("live")`, 10*time.Second)
	b.do(chromedp.Navigate(s.base + "/#/queues/flows"))
	b.waitFor("the flow keys read", `document.getElementById("flow-panel").dataset.read === "flows"`, 10*time.Second)
	require.Equal(t, "true", b.eval(`String(document.getElementById("flow-panel").hidden)`))
	console := watchConsole(b)

	// Fixtures: 143 keys with work, the top 20 answered; tenant-03 with an
	// override; one key's jobs.
	page := flowKeysPage{Total: 143}
	for i := range 20 {
		k := queue.FlowKeyStats{Key: fmt.Sprintf("tenant-%02d", i), Pending: int64(1000 - 10*i), InFlight: int64(i % 3)}
		if i == 3 {
			k.Override = &queue.FlowOverride{Key: k.Key, MaxInFlight: 1, Weight: 3}
		}
		page.Keys = append(page.Keys, k)
	}
	picked := flowKeyPage{FlowKeyStats: page.Keys[3], PendingJobs: []string{jobID}, ProcessingJobs: []string{}}
	var f fakeFlow
	f.start(t, b, "flows", map[string]any{
		"/v1/queues/flows/flow":                queue.FlowLimits{MaxInFlight: 2, Rate: 5, Burst: 1, Strategy: queue.FlowCancelNewest},
		"/v1/queues/flows/flow/keys":           page,
		"/v1/queues/flows/flow/keys/tenant-03": picked,
	})
	b.do(chromedp.Reload())
	b.waitFor("the flow keys panel", `!document.getElementById("flow-panel").hidden`, 10*time.Second)
	require.Contains(t, f.seen(), "/v1/queues/flows/flow/keys?offset=0&limit=20")
	require.Contains(t, f.seen(), "/v1/queues/flows/flow")
	require.Equal(t, "143", b.eval(`document.getElementById("flow-total").textContent`))
	require.Equal(t, "false", b.eval(`String(document.getElementById("flow-top").hidden)`), "says only the top 20 are shown")
	require.Equal(t, "Each key: at most 2 in flight, 5/s (burst 1), at the in-flight limit: cancel newest.",
		b.eval(`document.getElementById("flow-limits").textContent`))
	require.Equal(t, 20.0, b.num(`document.querySelectorAll("#flow-keys tr.flow-key").length`))
	require.Equal(t, "tenant-00|1000|0|—", b.eval(`[...document.querySelector("#flow-keys tr.flow-key").cells].map(c => c.textContent).join("|")`))
	require.Equal(t, "tenant-03|970|0|weight 3, at most 1 in flight",
		b.eval(`[...document.querySelector("#flow-keys tr[data-key=tenant-03]").cells].map(c => c.textContent).join("|")`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("no-flow-keys").hidden)`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("flow-key-box").hidden)`))

	// A key clicked: its jobs, each a link to its page.
	b.clickLive(`#flow-keys tr[data-key=tenant-03] td:nth-child(2)`)
	b.waitFor("the key's jobs", `!document.getElementById("flow-key-box").hidden`, 10*time.Second)
	require.Equal(t, "#/queues/flows/flow/tenant-03", b.eval(`location.hash`))
	require.Contains(t, f.seen(), "/v1/queues/flows/flow/keys/tenant-03?limit=50")
	require.Equal(t, "tenant-03", b.eval(`document.getElementById("flow-key-name").textContent`))
	require.Equal(t, "970", b.eval(`document.getElementById("flow-key-pending").textContent`))
	require.Equal(t, "0", b.eval(`document.getElementById("flow-key-in-flight").textContent`))
	require.Equal(t, "· override: weight 3, at most 1 in flight", b.eval(`document.getElementById("flow-key-override").textContent`))
	require.Equal(t, "true", b.eval(`String(document.querySelector("#flow-keys tr[data-key=tenant-03]").classList.contains("selected"))`))
	require.Equal(t, "#/queues/flows/jobs/"+jobID, b.eval(`document.querySelector("#flow-key-pending-jobs a").getAttribute("href")`))
	require.Equal(t, "true", b.eval(`String(document.getElementById("no-flow-key-pending").hidden)`))
	require.Equal(t, "false", b.eval(`String(document.getElementById("no-flow-key-processing").hidden)`), "no processing job: None.")
	b.screenshot("dashboard-flow.png")

	b.do(b.click(`#flow-key-pending-jobs a`))
	b.waitFor("the job's page", `!document.querySelector("[data-view=job]").hidden && document.getElementById("detail-id").textContent === `+strconv.Quote(jobID), 10*time.Second)
	b.do(chromedp.NavigateBack())
	b.waitFor("the key's jobs again", `!document.getElementById("flow-key-box").hidden`, 10*time.Second)
	b.do(b.click(`#flow-key-close`))
	b.waitFor("the key closed", `location.hash === "#/queues/flows" && document.getElementById("flow-key-box").hidden`, 10*time.Second)
	require.Equal(t, "false", b.eval(`String(document.getElementById("flow-panel").hidden)`))
	console.none(t, false)
}
