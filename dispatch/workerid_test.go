package dispatch_test

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/registry"
)

// TestWorkerIDs: the worker of each push queue is in the registry under a
// readable id, dispatch-<host>-<pid>-<queue>-<n>, serving its queue; a
// queue whose worker is replaced (its concurrency changed) gets a new n,
// and the old worker leaves the registry.
func TestWorkerIDs(t *testing.T) {
	t.Parallel()
	r := newRig(t, loopback, nil)
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, _ *http.Request) {})
	r.push("hooks", rc.URL, nil)
	reg, err := registry.New(r.c, registry.Config{})
	require.NoError(t, err)
	host, _ := os.Hostname()
	want := regexp.MustCompile(`^dispatch-` + regexp.QuoteMeta(registry.SanitizeID(host, 0)) + `-` + strconv.Itoa(os.Getpid()) + `-hooks-(\d+)$`)
	live := func() []registry.Worker {
		p, err := reg.List(r.ctx, registry.ListOptions{})
		require.NoError(t, err)
		return p.Workers
	}
	require.Eventually(t, func() bool { return len(live()) == 1 }, 10*time.Second, 10*time.Millisecond)
	w := live()[0]
	m := want.FindStringSubmatch(w.ID)
	require.NotNil(t, m, w.ID)
	require.Equal(t, []string{"hooks"}, w.Queues)

	r.push("hooks", rc.URL, func(c *dispatch.QueueConfig) { c.Concurrency = 3 })
	require.Eventually(t, func() bool {
		ws := live()
		return len(ws) == 1 && ws[0].ID != w.ID
	}, 10*time.Second, 10*time.Millisecond)
	m2 := want.FindStringSubmatch(live()[0].ID)
	require.NotNil(t, m2, live()[0].ID)
	n1, _ := strconv.Atoi(m[1])
	n2, _ := strconv.Atoi(m2[1])
	require.Greater(t, n2, n1)

	// The longest queue name still makes a valid id.
	id := dispatch.WorkerID(strings.Repeat("q", 64))
	require.NoError(t, registry.ValidateID(id), id)
	require.Contains(t, id, "-"+strings.Repeat("q", 64)+"-")
}
