package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the count of one scenario. See the package documentation for
// what each figure means.
type Report struct {
	Scenario string        `json:"scenario"`
	Duration time.Duration `json:"duration_ns"`
	Queues   []string      `json:"queues"`
	// Placement of the queues on a cluster's masters (queue -> master).
	Placement map[string]string `json:"placement,omitempty"`

	Attempted      int `json:"attempted"`       // enqueues tried
	Enqueued       int `json:"enqueued"`        // acknowledged
	UnackedPresent int `json:"unacked_present"` // tried, not acknowledged, but there (allowed)
	Completed      int `json:"completed"`       // acknowledged jobs completed
	Dead           int `json:"dead"`            // acknowledged jobs dead
	DeadNonPoison  int `json:"dead_non_poison"`
	Lost           int `json:"lost"`
	Unexpected     int `json:"unexpected"`
	// Early counts runs claimed before their job was due, by Redis's
	// clock: the claim's claimed_at before the run_at the job had when it
	// was claimed (its enqueue's due time, or a retry's). Not the run_at
	// the enqueue answered: when go-redis resends an enqueue whose reply
	// was lost, the answer is the rerun's, whose now (and so the due time
	// of a delay, or of a job due at once) is later than that of the run
	// that made the job.
	Early int `json:"early"`
	// EarlyReleases counts runs of a workflow node (the workflow
	// scenario's diamond) whose upstream did not name every parent: the
	// node was released before its last parent ended.
	EarlyReleases int `json:"early_releases"`
	NodeRuns      int `json:"node_runs"` // runs of workflow nodes, each checked so
	// Clocks are the processes whose clocks were skewed, and by how much.
	Clocks map[string]string `json:"clocks,omitempty"`

	Executions          int            `json:"executions"`
	Retries             int            `json:"retries"` // runs after an accepted failure
	Duplicates          int            `json:"duplicates"`
	DuplicatesExplained int            `json:"duplicates_explained"`
	DuplicatesByFault   map[string]int `json:"duplicates_by_fault"`
	ExplainedByStall    int            `json:"duplicates_explained_by_stall"` // by a stall observed, not injected
	Unexplained         int            `json:"duplicates_unexplained"`
	Concurrent          int            `json:"duplicates_concurrent"` // the second began before the first ended (both ran at once)
	StaleRefused        int            `json:"stale_refused"`
	GhostCompletions    int            `json:"ghost_completions"`
	DoubleCompletions   int            `json:"double_completions"`
	AttemptReuse        int            `json:"attempt_reuse"`

	Poison      int `json:"poison"`
	PoisonOK    int `json:"poison_ok"`
	PoisonWrong int `json:"poison_wrong"`

	LeftScheduled int64    `json:"left_scheduled"`
	LeftPending   int64    `json:"left_pending"`
	LeftLeases    int64    `json:"left_leases"`
	Orphans       int      `json:"orphan_hashes"`
	HashesKept    int      `json:"job_hashes_kept"` // completed (within retention) or dead
	Markers       int      `json:"markers"`         // claim retry markers: claims none of whose jobs was acked
	OtherKeys     []string `json:"other_keys,omitempty"`
	StatsMismatch []string `json:"stats_mismatch,omitempty"`

	Faults          map[string]int              `json:"faults"` // injected and observed
	Stalls          map[string]int              `json:"stalls"` // observed, not injected
	MaxStall        time.Duration               `json:"max_stall_ns"`
	DropsByCommand  map[string]int              `json:"proxy_drops_by_command,omitempty"`
	Errors          map[string]map[string]int64 `json:"errors"`
	ForbiddenErrors int64                       `json:"forbidden_errors"`
	CallerErrors    int64                       `json:"caller_errors"` // every class but lease_lost (the fencing, counted as stale-token writes refused)
	ErrorSamples    []string                    `json:"error_samples,omitempty"`

	// Flow control (the flow scenario; see flow.go). FlowLimit is every
	// key's MaxInFlight, FlowOverride the first key's (0: no flow keys).
	FlowLimit        int `json:"flow_limit,omitempty"`
	FlowOverride     int `json:"flow_override,omitempty"`
	FlowSamples      int `json:"flow_samples,omitempty"`       // the observer's reads of every key's in-flight count
	FlowSampleErrors int `json:"flow_sample_errors,omitempty"` // reads that failed (a slot moving, a worker's count unaffected)
	FlowOverSampled  int `json:"flow_over_sampled,omitempty"`  // samples of a key over its limit
	// FlowPeak is the most jobs in flight the observer saw per key;
	// FlowRunPeak the most runs under way per key, from the ledger.
	FlowPeak              map[string]int `json:"flow_peak,omitempty"`
	FlowRunPeak           map[string]int `json:"flow_run_peak,omitempty"`
	FlowRunsOver          int            `json:"flow_runs_over,omitempty"`           // runs begun past their key's limit, unexplained
	FlowRunsOverExplained int            `json:"flow_runs_over_explained,omitempty"` // ... while a run of the key had lost its lease
	FlowWrongKey          int            `json:"flow_wrong_key,omitempty"`           // runs whose job's flow key is not its enqueue's
	FlowKeysLeft          int64          `json:"flow_keys_left,omitempty"`           // keys with work after the drain

	Examples map[string][]string `json:"examples,omitempty"` // a few job ids per problem
	Failures []string            `json:"failures"`
	Pass     bool                `json:"pass"`
}

func (r *Report) example(kind, s string) {
	if r.Examples == nil {
		r.Examples = map[string][]string{}
	}
	if len(r.Examples[kind]) < 5 {
		r.Examples[kind] = append(r.Examples[kind], s)
	}
}

// explains reports whether fault kind k can explain a duplicate run.
// A SCRIPT FLUSH must not: a script reloaded is the same script.
func explains(k string) bool { return k != FaultScriptFlush }

// duringInjected reports whether stall s lies within a fault injected on
// its worker (a SIGSTOP is a stall too) or on everyone.
func duringInjected(faults []Fault, s Fault) bool {
	for _, f := range faults {
		if !observed(f.Kind) && explains(f.Kind) && f.Kind != FaultProxyDrop && (f.Target == s.Target || f.Target == "") &&
			f.Start <= s.Start+int64(100*time.Millisecond) && s.End <= f.End+int64(time.Second) {
			return true
		}
	}
	return false
}

// observed reports whether fault kind k was seen, not injected.
func observed(k string) bool { return k == FaultStall || k == FaultRedisStall }

// run is one execution of a job, put together from its start and end.
type run struct {
	start Exec
	end   *Exec
}

// Check counts one scenario from its ledger and the final snapshot. It is
// a pure function: the rules are in one place, and tested on made-up runs.
// Each rule is a method of checker, applied in the order below, which is
// also the order a problem's examples (at most five) are taken in.
func Check(name string, rec *Records, snap *Snapshot) *Report {
	r := &Report{Scenario: name, Faults: map[string]int{}, Stalls: map[string]int{}, DuplicatesByFault: map[string]int{}, Errors: rec.Errors}
	r.Attempted, r.Enqueued = len(rec.Attempts), len(rec.Acks)
	c := newChecker(r, rec, snap)
	c.countFaults()
	c.checkAcknowledged()
	c.checkJobsLeft()
	c.countOutcomes()
	c.checkRuns()
	c.checkCompletedRuns()
	c.checkQueues()
	c.checkStats()
	c.countErrors()
	r.ErrorSamples = rec.Samples
	r.judge()
	return r
}

// checker holds what Check reads and the indexes its rules share.
type checker struct {
	r    *Report
	rec  *Records
	snap *Snapshot

	bySeq    map[int64][]*JobState      // jobs in Redis, by sequence number
	ackedIDs map[string]Ack             // acknowledged enqueues, by job id
	runs     map[string]map[string]*run // runs, by job and token
	outcomes map[string][]Outcome       // the store's outcomes, by token
}

func newChecker(r *Report, rec *Records, snap *Snapshot) *checker {
	c := &checker{r: r, rec: rec, snap: snap, bySeq: map[int64][]*JobState{}, ackedIDs: map[string]Ack{},
		runs: runsOf(rec.Execs), outcomes: map[string][]Outcome{}}
	for _, js := range snap.Jobs {
		c.bySeq[js.Seq] = append(c.bySeq[js.Seq], js)
	}
	for _, a := range rec.Acks {
		c.ackedIDs[a.ID] = a
	}
	for _, o := range rec.Outcomes {
		c.outcomes[o.Token] = append(c.outcomes[o.Token], o)
	}
	return c
}

// runsOf puts the runs together from their starts and ends, by job and
// token.
func runsOf(execs []Exec) map[string]map[string]*run {
	runs := map[string]map[string]*run{}
	for _, e := range execs {
		m := runs[e.ID]
		if m == nil {
			m = map[string]*run{}
			runs[e.ID] = m
		}
		x := m[e.Token]
		if x == nil {
			x = &run{}
			m[e.Token] = x
		}
		if e.Ev == "start" {
			x.start = e
		} else {
			x.end = &e
		}
	}
	return runs
}

// countFaults counts the faults by kind, the stalls no injected fault
// explains, and the connections the proxies dropped by command.
func (c *checker) countFaults() {
	r := c.r
	for _, f := range c.rec.Faults {
		r.Faults[f.Kind]++
		if observed(f.Kind) && !duringInjected(c.rec.Faults, f) {
			r.Stalls[f.Kind]++
			r.MaxStall = max(r.MaxStall, time.Duration(f.End-f.Start))
		}
		if f.Kind == FaultProxyDrop {
			if r.DropsByCommand == nil {
				r.DropsByCommand = map[string]int{}
			}
			r.DropsByCommand[f.Note]++
		}
	}
}

// checkAcknowledged checks that every acknowledged enqueue came out:
// completed, or dead if it is poison, after exactly its max attempts.
func (c *checker) checkAcknowledged() {
	for _, seq := range slices.Sorted(maps.Keys(c.rec.Acks)) {
		id := c.rec.Acks[seq].ID
		js := c.snap.Jobs[id]
		poison := c.rec.Attempts[seq].Poison
		c.checkOutcome(id, js, poison)
		if poison {
			c.checkPoison(id, js)
		}
	}
}

// checkOutcome counts how the acknowledged job id (js in Redis, nil if
// gone) ended.
func (c *checker) checkOutcome(id string, js *JobState, poison bool) {
	r := c.r
	switch {
	case js == nil:
		r.Lost++
		r.example("lost", id+" (no such job)")
	case js.Status == "completed":
		r.Completed++
	case js.Status == "dead":
		r.Dead++
		if !poison {
			r.DeadNonPoison++
			r.example("dead_non_poison", id+": "+js.LastError)
		}
	default:
		r.Lost++
		r.example("lost", id+" (status "+js.Status+")")
	}
}

// checkPoison checks that the poison job id is dead after exactly its max
// attempts.
func (c *checker) checkPoison(id string, js *JobState) {
	r := c.r
	r.Poison++
	if js != nil && js.Status == "dead" && js.Attempts == js.MaxAttempts {
		r.PoisonOK++
		return
	}
	r.PoisonWrong++
	if js != nil {
		r.example("poison_wrong", fmt.Sprintf("%s: status %s, attempts %d of %d", id, js.Status, js.Attempts, js.MaxAttempts))
	}
}

// checkJobsLeft checks every job in Redis: it was put in, and it is
// finished.
func (c *checker) checkJobsLeft() {
	for _, js := range c.snap.Jobs {
		c.checkOrigin(js)
		c.checkFinished(js)
	}
}

// checkOrigin checks that job js comes from a try: nothing may come out
// that was never put in, and one try makes at most one job.
func (c *checker) checkOrigin(js *JobState) {
	r := c.r
	a, acked := c.rec.Acks[js.Seq]
	_, tried := c.rec.Attempts[js.Seq]
	switch {
	case js.Seq < 0 || !tried:
		r.Unexpected++
		r.example("unexpected", js.ID+" (never tried)")
	case acked && a.ID != js.ID:
		r.Unexpected++
		r.example("unexpected", fmt.Sprintf("%s (a second job for seq %d, acknowledged as %s)", js.ID, js.Seq, a.ID))
	case !acked:
		if slices.IndexFunc(c.bySeq[js.Seq], func(o *JobState) bool { return o.ID < js.ID }) >= 0 {
			r.Unexpected++ // two jobs from one unacknowledged try: one is extra
			r.example("unexpected", fmt.Sprintf("%s (a second job for unacknowledged seq %d)", js.ID, js.Seq))
		} else {
			r.UnackedPresent++
		}
	}
}

// checkFinished checks that job js is finished: completed (with an
// expiry) or dead (in the dead set).
func (c *checker) checkFinished(js *JobState) {
	switch {
	case js.Status == "completed" && js.TTL > 0, js.Status == "dead" && js.InDead:
		c.r.HashesKept++
	default:
		c.r.Orphans++
		c.r.example("orphan", fmt.Sprintf("%s: status %s, ttl %s, in dead set %v", js.ID, js.Status, js.TTL, js.InDead))
	}
}

// countOutcomes counts the stale-token writes refused, and checks that a
// job's completion was accepted once, for the token the job holds.
func (c *checker) countOutcomes() {
	completedBy := map[string][]string{}
	for _, o := range c.rec.Outcomes {
		if o.Store == "lease_lost" {
			c.r.StaleRefused++
		}
		if o.Status == "completed" {
			completedBy[o.ID] = append(completedBy[o.ID], o.Token)
		}
	}
	for id, toks := range completedBy {
		js := c.snap.Jobs[id]
		if len(toks) > 1 || (js != nil && js.Token != toks[0]) {
			c.r.DoubleCompletions++
			c.r.example("double_completion", fmt.Sprintf("%s: accepted for tokens %v", id, toks))
		}
	}
}

// checkRuns checks the runs of every job: each of a job that was put in,
// each on time, with its parents, under an attempt number of its own, and
// every run after the first either a retry or a duplicate a fault
// explains.
func (c *checker) checkRuns() {
	for id, m := range c.runs {
		if _, acked := c.ackedIDs[id]; !acked && c.snap.Jobs[id] == nil {
			c.r.Unexpected++
			c.r.example("unexpected", id+" (executed, never acknowledged nor present)")
		}
		rs := inClaimOrder(m)
		c.r.Executions += len(rs)
		attempts := map[int]bool{}
		for i, cur := range rs {
			c.checkDue(id, cur.start)
			c.checkRelease(id, cur.start)
			if attempts[cur.start.Attempt] {
				c.r.AttemptReuse++
				c.r.example("attempt_reuse", fmt.Sprintf("%s: attempt %d ran under two tokens", id, cur.start.Attempt))
			}
			attempts[cur.start.Attempt] = true
			if i > 0 {
				c.checkRepeat(id, rs[i-1], cur)
			}
		}
	}
}

// inClaimOrder is a job's runs in claim order: a run claimed first may
// start later (its worker stalled between the claim and the handler).
func inClaimOrder(m map[string]*run) []*run {
	rs := make([]*run, 0, len(m))
	for _, x := range m {
		if x.start.T == 0 { // an end without its start: the start was recorded first, always
			x.start = *x.end
		}
		rs = append(rs, x)
	}
	slices.SortFunc(rs, func(a, b *run) int {
		return cmp.Or(cmp.Compare(a.start.Attempt, b.start.Attempt), cmp.Compare(a.start.T, b.start.T))
	})
	return rs
}

// checkDue checks that a run of job id was not claimed before its job was
// due, by Redis's clock.
func (c *checker) checkDue(id string, e Exec) {
	if e.Claimed > 0 && e.Claimed < e.Due {
		c.r.Early++
		c.r.example("early", fmt.Sprintf("%s: attempt %d claimed on %s at %s by Redis's clock, due %s (enqueue answered %s)",
			id, e.Attempt, e.Slot, stampMs(e.Claimed), stampMs(e.Due), stampMs(c.ackedIDs[id].Due)))
	}
}

// checkRelease checks that a run of a workflow node was released after
// every parent ended: its upstream names them all.
func (c *checker) checkRelease(id string, e Exec) {
	if e.Node == "" {
		return
	}
	c.r.NodeRuns++
	if want := parentsOf(e.Node); !slices.Equal(e.Up, want) {
		c.r.EarlyReleases++
		c.r.example("early_release", fmt.Sprintf("%s: node %s attempt %d ran with the upstream of %v, its parents are %v",
			id, e.Node, e.Attempt, e.Up, want))
	}
}

// checkRepeat counts run cur of job id, which follows run prev in claim
// order: a retry if prev's outcome sent the job on, else a duplicate,
// which a fault must explain.
func (c *checker) checkRepeat(id string, prev, cur *run) {
	r := c.r
	if retried(c.outcomes[prev.start.Token]) {
		r.Retries++
		return
	}
	r.Duplicates++
	if prev.end != nil && cur.end != nil && max(prev.start.T, cur.start.T) < min(prev.end.T, cur.end.T) {
		r.Concurrent++
	}
	if k := explainedBy(c.rec.Faults, prev.start, cur.start); k != "" {
		r.DuplicatesExplained++
		r.DuplicatesByFault[k]++
		if observed(k) {
			r.ExplainedByStall++
		}
		return
	}
	r.Unexplained++
	r.example("unexplained_duplicate", fmt.Sprintf("%s: attempt %d claimed on %s at %s, ran at %s; attempt %d on %s ran at %s",
		id, prev.start.Attempt, prev.start.Slot, stamp(prev.start.Claimed), stamp(prev.start.T), cur.start.Attempt, cur.start.Slot, stamp(cur.start.T)))
}

// checkCompletedRuns checks that a completed job was completed by a run
// that ended well.
func (c *checker) checkCompletedRuns() {
	for _, js := range c.snap.Jobs {
		if js.Status != "completed" {
			continue
		}
		x := c.runs[js.ID][js.Token]
		if x == nil || x.end == nil || x.end.Err != "" {
			c.r.GhostCompletions++
			c.r.example("ghost_completion", js.ID+" completed under token "+js.Token+" with no successful run recorded")
		}
	}
}

// checkQueues counts what is left in the queues' structures, and checks
// that every id in a dead set has its job; then it takes the markers and
// the keys of no queue from the snapshot.
func (c *checker) checkQueues() {
	r := c.r
	for _, q := range slices.Sorted(maps.Keys(c.snap.Queues)) {
		qs := c.snap.Queues[q]
		r.Queues = append(r.Queues, q)
		r.LeftScheduled += qs.Scheduled
		r.LeftPending += qs.Pending
		r.LeftLeases += qs.Leases
		for _, id := range qs.DeadIDs {
			if c.snap.Jobs[id] == nil {
				r.Orphans++
				r.example("orphan", id+": in the dead set of "+q+" with no job")
			}
		}
	}
	r.Markers, r.OtherKeys = c.snap.Markers, c.snap.Other
}

// checkStats checks that the queues' counters agree with the jobs left:
// as many completed, as many dead, and as many enqueued as there are jobs.
func (c *checker) checkStats() {
	stats := map[string]int64{} // summed over the queues
	for _, qs := range c.snap.Queues {
		for k, n := range qs.Stats {
			stats[k] += n
		}
	}
	jobs := map[string]int64{} // by status
	for _, js := range c.snap.Jobs {
		jobs[js.Status]++
	}
	for _, m := range []struct {
		stat, what string
		jobs       int64
	}{
		{"completed", "completed jobs", jobs["completed"]},
		{"dead", "dead jobs", jobs["dead"]},
		{"enqueued", "jobs", int64(len(c.snap.Jobs))},
	} {
		if stats[m.stat] != m.jobs {
			c.r.StatsMismatch = append(c.r.StatsMismatch, fmt.Sprintf("stats %s %d, %s %d", m.stat, stats[m.stat], m.what, m.jobs))
		}
	}
}

// countErrors counts the errors that reached callers: those of a
// forbidden class, and all but lease_lost (the fencing, counted as
// stale-token writes refused).
func (c *checker) countErrors() {
	for _, byClass := range c.rec.Errors {
		for class, n := range byClass {
			if IsForbidden(class) {
				c.r.ForbiddenErrors += n
			}
			if class != "lease_lost" {
				c.r.CallerErrors += n
			}
		}
	}
}

// retried reports whether a run's outcome sent its job on to another run:
// a failure the store accepted (a retry), or a hand-back at a worker's stop.
func retried(os []Outcome) bool {
	for _, o := range os {
		if o.HandedBack || (o.Store == "" && (o.Status == "scheduled" || o.Status == "pending")) {
			return true
		}
	}
	return false
}

// explainedBy answers the kind of a fault that explains running a job again
// after first (the earlier claim): one whose window meets the time from
// first's claim to second's start and that struck first's process (a worker
// killed or stopped, its connection dropped) or everyone (Redis killed, a
// node restarted, a failover). Injected faults are preferred to stalls the
// battery only observed. "" when none does.
func explainedBy(faults []Fault, first, second Exec) string {
	from := first.T
	if first.Claimed > 0 {
		from = min(from, first.Claimed)
	}
	var targeted, global, stall string
	for _, f := range faults {
		if !explains(f.Kind) || f.Start > second.T || f.End < from {
			continue
		}
		switch {
		case f.Target != first.Slot && f.Target != "":
		case observed(f.Kind):
			stall = cmp.Or(stall, f.Kind)
		case f.Target == first.Slot:
			targeted = cmp.Or(targeted, f.Kind)
		default:
			global = cmp.Or(global, f.Kind)
		}
	}
	return cmp.Or(targeted, global, stall)
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }

// stampMs writes an instant kept to the millisecond; "-" for none.
func stampMs(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return stamp(ns)
}

// AddFailure records a failure found outside the count (a process that
// died unexpectedly, a drain that did not finish).
func (r *Report) AddFailure(msg string) {
	r.Failures = append(r.Failures, msg)
	r.Pass = false
}

// judge lists the failures: any one makes the scenario fail.
func (r *Report) judge() {
	add := func(bad bool, format string, args ...any) {
		if bad {
			r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
		}
	}
	add(r.Enqueued == 0, "nothing was enqueued")
	add(r.Lost > 0, "%d acknowledged jobs lost", r.Lost)
	add(r.Unexpected > 0, "%d unexpected jobs or runs", r.Unexpected)
	add(r.Early > 0, "%d runs claimed before their job was due by Redis's clock", r.Early)
	add(r.EarlyReleases > 0, "%d runs of workflow nodes released before every parent ended", r.EarlyReleases)
	add(r.Unexplained > 0, "%d duplicate runs no fault explains", r.Unexplained)
	add(r.PoisonWrong > 0, "%d poison jobs not dead with exactly their max attempts", r.PoisonWrong)
	add(r.DeadNonPoison > 0, "%d ordinary jobs dead", r.DeadNonPoison)
	add(r.GhostCompletions > 0, "%d jobs completed with no successful run", r.GhostCompletions)
	add(r.DoubleCompletions > 0, "%d jobs with more than one accepted completion", r.DoubleCompletions)
	add(r.AttemptReuse > 0, "%d attempt numbers used twice", r.AttemptReuse)
	left := r.LeftScheduled + r.LeftPending + r.LeftLeases
	add(left > 0, "%d entries left in scheduled/pending/processing/leases", left)
	add(r.Orphans > 0, "%d orphaned jobs or dead-set ids", r.Orphans)
	add(len(r.StatsMismatch) > 0, "stats disagree with the jobs: %v", r.StatsMismatch)
	add(r.ForbiddenErrors > 0, "%d %s errors reached a caller", r.ForbiddenErrors, strings.Join(ForbiddenClasses, "/"))
	r.Pass = len(r.Failures) == 0
}

// parentsOf is the parents of a node of the workflow scenario's diamond,
// sorted (nil for a root, or a name that is not the diamond's).
func parentsOf(node string) []string {
	for _, n := range diamond {
		if n.name == node {
			return slices.Sorted(slices.Values(n.deps))
		}
	}
	return nil
}
