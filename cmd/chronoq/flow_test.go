package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestCLIFlow runs `chronoq flow` and `chronoq enqueue --flow-key`
// against a real serve: settings, overrides, the key listings, and the
// usage and API errors.
func TestCLIFlow(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--token", "tok", "--reclaim-interval", "1h"}, testutil.FakeClock())

	code, out, errOut := s.cli(t, "flow", "get", "tenants")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "max in flight:  0\n")
	require.Contains(t, out, "strategy:       queue\n")
	code, _, errOut = s.cli(t, "flow", "clear", "tenants")
	require.Equal(t, 1, code, "a queue never used")
	require.Contains(t, errOut, "404 not_found")

	code, out, errOut = s.cli(t, "flow", "set", "tenants", "--max-in-flight", "2", "--rate", "20", "--strategy", "cancel_newest")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "max in flight:  2\nrate:           20/s\nburst:          2\nstrategy:       cancel_newest\n", out)
	code, out, errOut = s.cli(t, "flow", "get", "tenants", "--json")
	require.Equal(t, 0, code, errOut)
	var l map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Equal(t, map[string]any{"max_in_flight": 2.0, "rate": 20.0, "burst": 2.0, "strategy": "cancel_newest"}, l)

	code, out, errOut = s.cli(t, "flow", "override", "set", "tenants", "acme/eu", "--weight", "3", "--max-in-flight", "5")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^acme/eu\s+5\s+0\s+0\s+3$`, out)

	code, out, errOut = s.cli(t, "enqueue", "--queue", "tenants", "--kind", "sync", "--flow-key", "acme/eu", "--json")
	require.Equal(t, 0, code, errOut)
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	require.Equal(t, "acme/eu", j["flow_key"])
	code, out, errOut = s.cli(t, "enqueue", "--queue", "tenants", "--kind", "sync", "--flow-key", "acme/eu", "--debounce", "1h")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "run at")

	code, out, errOut = s.cli(t, "flow", "keys", "tenants", "--limit", "10")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "KEY")
	require.Contains(t, out, "keys with jobs\n")
	code, out, errOut = s.cli(t, "flow", "key", "tenants", "acme/eu")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^acme/eu\s+\d+\s+\d+\s+max_in_flight=5 rate=0 burst=0 weight=3$`, out)
	require.Contains(t, out, "pending jobs:")

	code, out, errOut = s.cli(t, "flow", "override", "delete", "tenants", "acme/eu")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted the override of acme/eu in tenants\n", out)
	code, out, errOut = s.cli(t, "flow", "clear", "tenants")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "cleared the flow limits of tenants\n", out)

	// Usage errors: 2, nothing sent.
	for _, args := range [][]string{
		{"flow"},
		{"flow", "show", "tenants"},
		{"flow", "get"},
		{"flow", "get", "a", "b"},
		{"flow", "override", "set", "tenants"},
		{"flow", "override", "list", "tenants"},
		{"flow", "get", "tenants", "--weight", "2"},
		{"flow", "keys", "tenants", "--strategy", "queue"},
		{"flow", "set", "tenants", "--offset", "1"},
		{"enqueue", "--kind", "k", "--debounce", "5s"},
		{"enqueue", "--kind", "k", "--flow-key", "a", "--debounce-max-wait", "1m"},
	} {
		code, _, errOut := s.cli(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
	// API errors: 1, naming the field.
	for _, tt := range []struct {
		args  []string
		field string
	}{
		{[]string{"flow", "set", "tenants", "--strategy", "drop"}, "strategy"},
		{[]string{"flow", "set", "tenants", "--max-in-flight", "-1"}, "max_in_flight"},
		{[]string{"flow", "override", "set", "tenants", "acme", "--weight", "101"}, "weight"},
		{[]string{"flow", "keys", "tenants", "--limit", "0"}, "limit"},
		{[]string{"flow", "key", "tenants", "a b"}, "key"},
		{[]string{"enqueue", "--kind", "k", "--flow-key", "a b"}, "flow_key"},
		{[]string{"enqueue", "--kind", "k", "--flow-key", "a", "--debounce", "soon"}, "debounce.period"},
	} {
		code, _, errOut := s.cli(t, tt.args...)
		require.Equal(t, 1, code, "%v: %s", tt.args, errOut)
		require.Contains(t, errOut, "400 invalid_argument", "%v", tt.args)
		require.True(t, strings.Contains(errOut, "(field "+tt.field+")"), "%v: %s", tt.args, errOut)
	}
}
