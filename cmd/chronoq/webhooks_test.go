package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestCLIWebhooks runs "chronoq webhooks" against a real serve: a
// subscription created, listed, read, changed, its dead list read and
// redriven, deleted; bad input answered with the API's error.
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--token", "tok", "--reclaim-interval", "1h"}, testutil.FakeClock())

	code, out, errOut := s.cli(t, "webhooks", "create", "--endpoint", "https://example.com/events", "--queue", "mail,sms",
		"--event", "job.dead", "--event", "job.canceled", "--timeout", "5s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "queues:   mail, sms")
	require.Contains(t, out, "events:   job.canceled, job.dead")
	require.Contains(t, out, "kinds:    every one")
	require.Contains(t, out, "secrets:  whsec_")
	id := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]
	require.Len(t, id, 16)

	code, out, errOut = s.cli(t, "webhooks", "list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)
	require.Contains(t, out, "https://example.com/events")
	require.Contains(t, out, "mail,sms")

	code, out, errOut = s.cli(t, "webhooks", "update", id, "--endpoint", "https://example.com/v2", "--kind", "welcome")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "url:      https://example.com/v2")
	require.Contains(t, out, "queues:   every one")
	require.Contains(t, out, "kinds:    welcome")

	code, out, errOut = s.cli(t, "webhooks", "get", id, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"url": "https://example.com/v2"`)

	code, out, errOut = s.cli(t, "webhooks", "dead", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ID")
	code, out, errOut = s.cli(t, "webhooks", "retry", id)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "retried 0\n", out)

	code, _, errOut = s.cli(t, "webhooks", "create", "--endpoint", "https://example.com/", "--event", "job.finished")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "400 invalid_argument")
	require.Contains(t, errOut, "(field events[0])")
	code, _, errOut = s.cli(t, "webhooks", "create", "--endpoint", "http://127.0.0.1:1/")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "(field url)")

	code, out, errOut = s.cli(t, "webhooks", "delete", id)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted "+id+"\n", out)
	code, _, errOut = s.cli(t, "webhooks", "get", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404 not_found")

	for _, args := range [][]string{{"webhooks"}, {"webhooks", "create"}, {"webhooks", "get"}, {"webhooks", "show", id}} {
		code, _, _ := s.cli(t, args...)
		require.Equal(t, 2, code, "%v", args)
	}
}
