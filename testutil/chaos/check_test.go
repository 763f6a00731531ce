package chaos_test

import (
	"github.com/chronoq/chronoq/internal/store"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil/chaos"
)

// world builds a ledger and a final snapshot by hand, for the checker's
// rules.
type world struct {
	rec  *chaos.Records
	snap *chaos.Snapshot
}

func newWorld() *world {
	return &world{
		rec: &chaos.Records{Attempts: map[int64]chaos.Attempt{}, Acks: map[int64]chaos.Ack{},
			Errors: map[string]map[string]int64{}},
		snap: &chaos.Snapshot{Jobs: map[string]*chaos.JobState{},
			Queues: map[string]*chaos.QueueState{"q": {Stats: map[string]int64{}}}},
	}
}

var t0 = time.Date(2000, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()

func at(s float64) int64 { return t0 + int64(s*float64(time.Second)) }

// job adds a tried enqueue (acknowledged when acked) whose job ends in
// status with attempts, and keeps the stats consistent.
func (w *world) job(seq int64, id string, acked bool, status string, attempts, maxAttempts int, token string) {
	w.rec.Attempts[seq] = chaos.Attempt{Seq: seq, Queue: "q"}
	if acked {
		w.rec.Acks[seq] = chaos.Ack{Seq: seq, ID: id, Queue: "q"}
	}
	js := &chaos.JobState{ID: id, Queue: "q", Status: status, Attempts: attempts, MaxAttempts: maxAttempts,
		Token: token, Seq: seq, TTL: time.Hour}
	q := w.snap.Queues["q"]
	q.Stats["enqueued"]++
	switch status {
	case "completed":
		q.Stats["completed"]++
	case "dead":
		q.Stats["dead"]++
		js.InDead, js.TTL = true, -1
		q.DeadIDs = append(q.DeadIDs, id)
	}
	w.snap.Jobs[id] = js
}

// run adds a run of id under token on slot from start to end (end < 0:
// never ended), its handler error, and the store's answer.
func (w *world) run(id, token, slot string, attempt int, start, end float64, herr, status string) {
	w.rec.Execs = append(w.rec.Execs, chaos.Exec{Ev: "start", ID: id, Attempt: attempt, Token: token, Slot: slot, T: at(start)})
	if end >= 0 {
		w.rec.Execs = append(w.rec.Execs, chaos.Exec{Ev: "end", ID: id, Attempt: attempt, Token: token, Slot: slot, T: at(end), Err: herr})
		w.rec.Outcomes = append(w.rec.Outcomes, chaos.Outcome{ID: id, Token: token, Slot: slot, Status: status})
	}
}

func (w *world) fault(kind, target string, start, end float64) {
	w.rec.Faults = append(w.rec.Faults, chaos.Fault{Kind: kind, Target: target, Start: at(start), End: at(end)})
}

func (w *world) check() *chaos.Report { return chaos.Check("test", w.rec, w.snap) }

func TestCheckCleanRun(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", true, "completed", 1, 25, "ta")
	w.run("a", "ta", "w0", 1, 1, 1.1, "", "completed")
	r := w.check()
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 1, r.Enqueued)
	require.Equal(t, 1, r.Completed)
	require.Equal(t, 1, r.Executions)
	require.Zero(t, r.Duplicates)
}

func TestCheckLostAndUnexpected(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.rec.Attempts[1] = chaos.Attempt{Seq: 1}
	w.rec.Acks[1] = chaos.Ack{Seq: 1, ID: "gone"}
	w.job(2, "stuck", true, "pending", 0, 25, "")
	w.job(3, "phantom", true, "completed", 1, 25, "tp")
	delete(w.rec.Attempts, 3) // never tried
	delete(w.rec.Acks, 3)
	w.run("phantom", "tp", "w0", 1, 1, 1.1, "", "completed")
	r := w.check()
	require.False(t, r.Pass)
	require.Equal(t, 2, r.Lost, "no hash, and a hash still pending")
	require.Equal(t, 1, r.Unexpected)
	require.Equal(t, 1, r.Orphans, "the pending job's hash")
}

// A run claimed before its job was due by Redis's clock fails the run:
// before the due time the job had at the claim (its enqueue's, or a
// retry's). A claim at the due millisecond is on time, and so is one
// before the due time a resent enqueue answered (later than the job's).
func TestCheckEarly(t *testing.T) {
	t.Parallel()
	w := newWorld()
	claimed := func(id string, claimedAt, dueAtClaim float64) {
		w.rec.Execs = append(w.rec.Execs,
			chaos.Exec{Ev: "start", ID: id, Attempt: 1, Token: "t" + id, Slot: "w0", Claimed: at(claimedAt), Due: at(dueAtClaim), T: at(claimedAt)},
			chaos.Exec{Ev: "end", ID: id, Attempt: 1, Token: "t" + id, Slot: "w0", T: at(claimedAt + 0.1)})
		w.rec.Outcomes = append(w.rec.Outcomes, chaos.Outcome{ID: id, Token: "t" + id, Slot: "w0", Status: "completed"})
	}
	for i, id := range []string{"ontime", "atdue", "early", "earlyretry", "resent"} {
		w.job(int64(i+1), id, true, "completed", 1, 25, "t"+id)
		a := w.rec.Acks[int64(i+1)]
		a.Due = at(5)
		w.rec.Acks[int64(i+1)] = a
	}
	claimed("ontime", 5.2, 5)
	claimed("atdue", 5, 5)
	claimed("early", 4.9, 4.95)   // before the enqueue's due time
	claimed("earlyretry", 7, 7.5) // before a retry's due time
	claimed("resent", 4.9, 4.8)   // the enqueue answered 5, the job is due at 4.8
	r := w.check()
	require.Equal(t, 2, r.Early)
	require.False(t, r.Pass)
	require.Len(t, r.Examples["early"], 2)
}

func TestCheckUnacknowledgedButPresentIsAllowed(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", false, "completed", 1, 25, "ta")
	w.run("a", "ta", "w0", 1, 1, 1.1, "", "completed")
	w.job(2, "b", true, "completed", 1, 25, "tb")
	w.run("b", "tb", "w0", 1, 1, 1.1, "", "completed")
	r := w.check()
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 1, r.UnackedPresent)
	require.Equal(t, 1, r.Enqueued)
}

func TestCheckSecondJobForOneSeqIsUnexpected(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", true, "completed", 1, 25, "ta")
	w.run("a", "ta", "w0", 1, 1, 1.1, "", "completed")
	w.job(1, "b", false, "completed", 1, 25, "tb")
	w.rec.Acks[1] = chaos.Ack{Seq: 1, ID: "a"}
	w.run("b", "tb", "w0", 1, 1, 1.1, "", "completed")
	r := w.check()
	require.Equal(t, 1, r.Unexpected)
	require.False(t, r.Pass)
}

func TestCheckDuplicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		fault       func(w *world)
		explained   bool
		firstEnds   bool
		concurrency int
	}{
		{"worker of the first run killed", func(w *world) { w.fault("worker-kill", "w0", 2, 2.2) }, true, false, 0},
		{"redis killed", func(w *world) { w.fault("redis-kill", "", 1.5, 2.5) }, true, false, 0},
		{"another worker killed", func(w *world) { w.fault("worker-kill", "w1", 2, 2.2) }, false, false, 0},
		{"killed after the second run began", func(w *world) { w.fault("worker-kill", "w0", 6, 6.2) }, false, false, 0},
		{"scripts flushed", func(w *world) { w.fault("script-flush", "", 2, 2) }, false, false, 0},
		{"first run stopped, resumed, refused", func(w *world) { w.fault("worker-stop", "w0", 1.5, 5.5) }, true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld()
			w.job(1, "a", true, "completed", 2, 25, "t2")
			end := -1.0
			if tc.firstEnds {
				end = 6 // resumed after the second run began: refused
			}
			w.run("a", "t1", "w0", 1, 1, end, "", "")
			w.run("a", "t2", "w1", 2, 5, 5.1, "", "completed")
			tc.fault(w)
			r := w.check()
			require.Equal(t, 1, r.Duplicates)
			require.Equal(t, tc.concurrency, r.Concurrent)
			if tc.explained {
				require.Equal(t, 1, r.DuplicatesExplained)
				require.True(t, r.Pass, r.Failures)
			} else {
				require.Equal(t, 1, r.Unexplained)
				require.False(t, r.Pass)
			}
		})
	}
}

func TestCheckRetryAfterAcceptedFailureIsNoDuplicate(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "p", true, "dead", 3, 3, "t3")
	w.rec.Attempts[1] = chaos.Attempt{Seq: 1, Poison: true}
	w.run("p", "t1", "w0", 1, 1, 1.1, "boom", "scheduled")
	w.run("p", "t2", "w1", 2, 2, 2.1, "boom", "scheduled")
	w.run("p", "t3", "w0", 3, 3, 3.1, "boom", "dead")
	r := w.check()
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 2, r.Retries)
	require.Zero(t, r.Duplicates)
	require.Equal(t, 1, r.PoisonOK)
}

func TestCheckPoisonWithWrongAttempts(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "p", true, "dead", 4, 3, "t4")
	w.rec.Attempts[1] = chaos.Attempt{Seq: 1, Poison: true}
	r := w.check()
	require.Equal(t, 1, r.PoisonWrong)
	require.False(t, r.Pass)
}

func TestCheckGhostAndDoubleCompletion(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", true, "completed", 2, 25, "t2")
	w.run("a", "t1", "w0", 1, 1, 1.1, "", "completed")
	w.run("a", "t2", "w1", 2, 5, -1, "", "")
	r := w.check()
	require.Equal(t, 1, r.GhostCompletions, "completed under t2, whose run never ended")
	require.Equal(t, 1, r.DoubleCompletions, "a completion accepted for t1, but t2 holds the job")
	require.False(t, r.Pass)
}

func TestCheckLeftoversStatsAndErrors(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", true, "completed", 1, 25, "ta")
	w.run("a", "ta", "w0", 1, 1, 1.1, "", "completed")
	w.snap.Queues["q"].Leases = 1
	w.snap.Queues["q"].Stats["completed"]++ // counted twice
	w.rec.Errors["worker"] = map[string]int64{"UNBLOCKED": 2, "lease_lost": 3}
	w.rec.Errors["producer"] = map[string]int64{"TRYAGAIN": 4}
	r := w.check()
	require.Equal(t, int64(1), r.LeftLeases)
	require.NotEmpty(t, r.StatsMismatch)
	require.Equal(t, int64(2), r.ForbiddenErrors)
	require.Equal(t, int64(6), r.CallerErrors, "every class but the fencing's")
	require.Len(t, r.Failures, 3)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"queue: wait for q: queue: redis: UNBLOCKED force unblock from blocking operation": "UNBLOCKED",
		"queue: claim from q: queue: redis: MOVED 3999 127.0.0.1:6381":                     "MOVED",
		"NOSCRIPT No matching script":                                                      "NOSCRIPT",
		"queue: redis: dial tcp 127.0.0.1:1: connect: connection refused":                  "conn_refused",
		"queue: redis: LOADING Redis is loading the dataset in memory":                     "LOADING",
		"queue: enqueue to q: TRYAGAIN Multiple keys request during rehashing of slot":     "TRYAGAIN",
		"ERR Script attempted to access a non local key in a cluster node script: f_0123":  "NONLOCAL",
		"ERR Script attempted to access keys that do not hash to the same slot script: x":  "CROSSSLOT",
		"lease lost: stale or wrong claim token: job q/a":                                  "lease_lost",
		"redis: connection pool timeout":                                                   "pool_timeout",
		"something else":                                                                   "other",
	} {
		require.Equal(t, want, chaos.ClassifyText(msg), msg)
	}
}

func TestCommandName(t *testing.T) {
	t.Parallel()
	evalsha := func(sha string) []byte {
		return []byte("*8\r\n$7\r\nevalsha\r\n$" + strconv.Itoa(len(sha)) + "\r\n" + sha + "\r\n$1\r\n4\r\n" +
			"$17\r\nns:{q}:processing\r\n$13\r\nns:{q}:leases\r\n$16\r\nns:{q}:completed\r\n$12\r\nns:{q}:stats\r\n$6\r\nns:{q}\r\n")
	}
	hashes := store.ScriptHashes()
	require.Equal(t, "complete", chaos.CommandName(evalsha(hashes["complete"])))
	require.Equal(t, "blmove", chaos.CommandName([]byte("*6\r\n$6\r\nBLMOVE\r\n$3\r\nabc\r\n")))
	require.Equal(t, "?", chaos.CommandName([]byte("garbage")))
	require.Equal(t, "evalsha", chaos.CommandName(evalsha("0123456789012345678901234567890123456789")), "not one of the engine's")
	require.Equal(t, "eval", chaos.CommandName([]byte("*4\r\n$4\r\nEVAL\r\n$1000\r\nlocal x")), "a body cut short by the read")
	require.NotEmpty(t, hashes)
	for name, sha := range hashes {
		require.Equal(t, name, chaos.CommandName(evalsha(sha)), name)
	}
	fcall := func(fn string) []byte {
		return []byte("*4\r\n$5\r\nFCALL\r\n$" + strconv.Itoa(len(fn)) + "\r\n" + fn + "\r\n$1\r\n1\r\n$6\r\nns:{q}\r\n")
	}
	for _, name := range []string{"enqueue", "claim", "complete", "fail", "heartbeat"} {
		require.NotEmpty(t, store.FunctionName(name), name)
		require.Equal(t, name, chaos.CommandName(fcall(store.FunctionName(name))), name)
	}
	require.Equal(t, "fcall", chaos.CommandName(fcall("not_ours")), "not one of the engine's")
}

func TestCheckDuplicateInClaimOrder(t *testing.T) {
	t.Parallel()
	// w0 claims attempt 1 at 1 s and is stopped before its handler starts;
	// the lease lapses, w1 runs attempt 2 at 4 s; w0 resumes and runs
	// attempt 1 at 5.5 s. The fault struck the first claim's worker.
	w := newWorld()
	w.job(1, "a", true, "completed", 2, 25, "t2")
	w.rec.Execs = append(w.rec.Execs,
		chaos.Exec{Ev: "start", ID: "a", Attempt: 1, Token: "t1", Slot: "w0", Claimed: at(1), T: at(5.5)},
		chaos.Exec{Ev: "end", ID: "a", Attempt: 1, Token: "t1", Slot: "w0", Claimed: at(1), T: at(5.6)})
	w.rec.Outcomes = append(w.rec.Outcomes, chaos.Outcome{ID: "a", Token: "t1", Store: "lease_lost"})
	w.run("a", "t2", "w1", 2, 4, 4.1, "", "completed")
	w.fault("worker-stop", "w0", 1.2, 5.4)
	r := w.check()
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 1, r.DuplicatesExplained)
	require.Equal(t, 1, r.DuplicatesByFault["worker-stop"])
	require.Equal(t, 1, r.StaleRefused)
}

func TestCheckObservedStallExplainsLast(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.job(1, "a", true, "completed", 2, 25, "t2")
	w.run("a", "t1", "w0", 1, 1, -1, "", "")
	w.run("a", "t2", "w1", 2, 5, 5.1, "", "completed")
	w.fault("stall", "w0", 1.5, 3)
	r := w.check()
	require.True(t, r.Pass, r.Failures)
	require.Equal(t, 1, r.ExplainedByStall)
	require.Equal(t, 1, r.Stalls["stall"])

	w.fault("worker-kill", "w0", 2, 2.2)
	r = w.check()
	require.Zero(t, r.ExplainedByStall, "an injected fault is preferred")
	require.Equal(t, 1, r.DuplicatesByFault["worker-kill"])
}

// A workflow node's run whose upstream does not name every parent of its
// node in the diamond was released before its last parent ended: the run
// fails. Its roots have no upstream.
func TestCheckEarlyRelease(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		up   []string
		pass bool
	}{
		{"every parent", []string{"b", "c"}, true},
		{"one parent missing", []string{"b"}, false},
		{"no upstream", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld()
			nodes := []struct {
				id, node string
				up       []string
			}{{"ja", "a", nil}, {"jb", "b", []string{"a"}}, {"jc", "c", []string{"a"}}, {"jd", "d", tt.up}}
			for i, n := range nodes {
				w.job(int64(i+1), n.id, true, "completed", 1, 25, "t"+n.id)
				w.run(n.id, "t"+n.id, "w0", 1, float64(i+1), float64(i+1)+0.1, "", "completed")
				w.rec.Execs[len(w.rec.Execs)-2].Node, w.rec.Execs[len(w.rec.Execs)-2].Up = n.node, n.up
			}
			r := w.check()
			require.Equal(t, tt.pass, r.Pass, r.Failures)
			require.Equal(t, 4, r.NodeRuns)
			if !tt.pass {
				require.Equal(t, 1, r.EarlyReleases)
			}
		})
	}
}
