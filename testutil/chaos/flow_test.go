package chaos_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil/chaos"
)

// flowSetup is the flow scenario's: 20 keys, 2 in flight each, k00 5.
var flowSetup = chaos.FlowSetup{Keys: 20, MaxInFlight: 2, Override: 5}

// flowRun adds a run of job id (sequence number seq, so of key
// FlowKeyOf(seq)) by worker pid from start to end (end < 0: never ended),
// and the store's answer to it (storeErr: its error class, "" none).
func flowRun(rec *chaos.Records, id string, seq int64, pid int, start, end float64, storeErr string) {
	tok := id + "-" + string(rune('a'+len(rec.Execs)))
	key := chaos.FlowKeyOf(seq, flowSetup.Keys)
	rec.Execs = append(rec.Execs, chaos.Exec{Ev: "start", ID: id, Seq: seq, Token: tok, Pid: pid, Flow: key, T: at(start)})
	if end >= 0 {
		rec.Execs = append(rec.Execs, chaos.Exec{Ev: "end", ID: id, Seq: seq, Token: tok, Pid: pid, Flow: key, T: at(end)})
		rec.Outcomes = append(rec.Outcomes, chaos.Outcome{ID: id, Token: tok, Status: "completed", Store: storeErr})
	}
}

func checkFlow(rec *chaos.Records) *chaos.Report {
	r := &chaos.Report{Pass: true}
	chaos.CheckFlow(r, rec, flowSetup)
	return r
}

func TestFlowKeyOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "k00", chaos.FlowKeyOf(0, 20))
	require.Equal(t, "k00", chaos.FlowKeyOf(8, 20))
	seen := map[string]bool{}
	for seq := range int64(400) {
		seen[chaos.FlowKeyOf(seq, 20)] = true
	}
	require.Len(t, seen, 20, "every key gets jobs")
}

func TestCheckFlowWithinLimits(t *testing.T) {
	t.Parallel()
	rec := &chaos.Records{}
	// Seq 1 and 58 are both k02's: two at once is its limit.
	flowRun(rec, "a", 1, 10, 1, 2, "")
	flowRun(rec, "b", 58, 10, 1.5, 3, "")
	// A third begins as the first ends: ends come first.
	flowRun(rec, "c", 77, 11, 2, 2.5, "")
	// Five of k00 at once is its override.
	for i, seq := range []int64{4, 8, 12, 16, 24} {
		flowRun(rec, "z"+string(rune('0'+i)), seq, 12, 1, 2, "")
	}
	r := checkFlow(rec)
	require.True(t, r.Pass, r.Failures)
	require.Zero(t, r.FlowRunsOver)
	require.Equal(t, 2, r.FlowRunPeak["k02"])
	require.Equal(t, 5, r.FlowRunPeak["k00"])
}

func TestCheckFlowOverLimit(t *testing.T) {
	t.Parallel()
	rec := &chaos.Records{}
	flowRun(rec, "a", 1, 10, 1, 2, "")
	flowRun(rec, "b", 58, 10, 1.2, 3, "")
	flowRun(rec, "c", 77, 11, 1.5, 2.5, "")
	r := checkFlow(rec)
	require.False(t, r.Pass)
	require.Equal(t, 1, r.FlowRunsOver)
	require.Equal(t, 3, r.FlowRunPeak["k02"])
	require.Len(t, r.Examples["flow_runs_over"], 1)
}

func TestCheckFlowKilledWorker(t *testing.T) {
	t.Parallel()
	rec := &chaos.Records{}
	// Worker 10 is killed at 2 s in the middle of a: a's run ends there,
	// and two runs after it are within the limit.
	flowRun(rec, "a", 1, 10, 1, -1, "")
	rec.Faults = append(rec.Faults, chaos.Fault{Kind: chaos.FaultWorkerKill, Target: "w0", Pid: 10, Start: at(2), End: at(2.2)})
	flowRun(rec, "b", 58, 11, 1.5, 6, "")
	flowRun(rec, "a", 1, 11, 4.5, 5, "")
	r := checkFlow(rec)
	require.True(t, r.Pass, r.Failures)
	// Without the kill, a would be under way still: three at once.
	rec.Faults = nil
	rec.Execs = append(rec.Execs, chaos.Exec{Ev: "end", ID: "a", Seq: 1, Token: rec.Execs[0].Token, Pid: 10, Flow: "k02", T: at(10)})
	r = checkFlow(rec)
	require.Equal(t, 1, r.FlowRunsOver)
}

func TestCheckFlowLapsedLease(t *testing.T) {
	t.Parallel()
	rec := &chaos.Records{}
	// a's lease lapsed while it ran (its complete was refused): the
	// engine no longer counted it when c was claimed.
	flowRun(rec, "a", 1, 10, 1, 5, "lease_lost")
	flowRun(rec, "b", 58, 11, 1.5, 6, "")
	flowRun(rec, "c", 77, 11, 4, 4.5, "")
	r := checkFlow(rec)
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 1, r.FlowRunsOverExplained)
}

func TestCheckFlowWrongKey(t *testing.T) {
	t.Parallel()
	rec := &chaos.Records{}
	flowRun(rec, "a", 1, 10, 1, 2, "")
	rec.Execs[0].Flow = "k07"
	r := checkFlow(rec)
	require.False(t, r.Pass)
	require.Equal(t, 1, r.FlowWrongKey)
}
