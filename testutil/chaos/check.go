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
func Check(name string, rec *Records, snap *Snapshot) *Report {
	r := &Report{Scenario: name, Faults: map[string]int{}, Stalls: map[string]int{}, DuplicatesByFault: map[string]int{}, Errors: rec.Errors}
	r.Attempted, r.Enqueued = len(rec.Attempts), len(rec.Acks)
	for _, f := range rec.Faults {
		r.Faults[f.Kind]++
		if observed(f.Kind) && !duringInjected(rec.Faults, f) {
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

	// Jobs in Redis, by sequence number.
	bySeq := map[int64][]*JobState{}
	for _, js := range snap.Jobs {
		bySeq[js.Seq] = append(bySeq[js.Seq], js)
	}
	ackedIDs := map[string]Ack{} // by job id
	for _, a := range rec.Acks {
		ackedIDs[a.ID] = a
	}

	// Every acknowledged enqueue must have come out: completed or dead.
	for _, seq := range slices.Sorted(maps.Keys(rec.Acks)) {
		a := rec.Acks[seq]
		poison := rec.Attempts[seq].Poison
		if poison {
			r.Poison++
		}
		js := snap.Jobs[a.ID]
		switch {
		case js == nil:
			r.Lost++
			r.example("lost", a.ID+" (no such job)")
		case js.Status == "completed":
			r.Completed++
		case js.Status == "dead":
			r.Dead++
			if !poison {
				r.DeadNonPoison++
				r.example("dead_non_poison", a.ID+": "+js.LastError)
			}
		default:
			r.Lost++
			r.example("lost", a.ID+" (status "+js.Status+")")
		}
		if poison {
			if js != nil && js.Status == "dead" && js.Attempts == js.MaxAttempts {
				r.PoisonOK++
			} else {
				r.PoisonWrong++
				if js != nil {
					r.example("poison_wrong", fmt.Sprintf("%s: status %s, attempts %d of %d", a.ID, js.Status, js.Attempts, js.MaxAttempts))
				}
			}
		}
	}

	// Nothing may come out that was never put in.
	for _, js := range snap.Jobs {
		a, acked := rec.Acks[js.Seq]
		_, tried := rec.Attempts[js.Seq]
		switch {
		case js.Seq < 0 || !tried:
			r.Unexpected++
			r.example("unexpected", js.ID+" (never tried)")
		case acked && a.ID != js.ID:
			r.Unexpected++
			r.example("unexpected", fmt.Sprintf("%s (a second job for seq %d, acknowledged as %s)", js.ID, js.Seq, a.ID))
		case !acked:
			if slices.IndexFunc(bySeq[js.Seq], func(o *JobState) bool { return o.ID < js.ID }) >= 0 {
				r.Unexpected++ // two jobs from one unacknowledged try: one is extra
				r.example("unexpected", fmt.Sprintf("%s (a second job for unacknowledged seq %d)", js.ID, js.Seq))
			} else {
				r.UnackedPresent++
			}
		}
		// Every job left must be finished: completed (with an expiry) or
		// dead (in the dead set).
		switch {
		case js.Status == "completed" && js.TTL > 0, js.Status == "dead" && js.InDead:
			r.HashesKept++
		default:
			r.Orphans++
			r.example("orphan", fmt.Sprintf("%s: status %s, ttl %s, in dead set %v", js.ID, js.Status, js.TTL, js.InDead))
		}
	}

	// Runs, by job and token.
	runs := map[string]map[string]*run{}
	for _, e := range rec.Execs {
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
	outcomes := map[string][]Outcome{} // by token
	completedBy := map[string][]string{}
	for _, o := range rec.Outcomes {
		outcomes[o.Token] = append(outcomes[o.Token], o)
		if o.Store == "lease_lost" {
			r.StaleRefused++
		}
		if o.Status == "completed" {
			completedBy[o.ID] = append(completedBy[o.ID], o.Token)
		}
	}
	for id, toks := range completedBy {
		js := snap.Jobs[id]
		if len(toks) > 1 || (js != nil && js.Token != toks[0]) {
			r.DoubleCompletions++
			r.example("double_completion", fmt.Sprintf("%s: accepted for tokens %v", id, toks))
		}
	}
	for id, m := range runs {
		if _, acked := ackedIDs[id]; !acked && snap.Jobs[id] == nil {
			r.Unexpected++
			r.example("unexpected", id+" (executed, never acknowledged nor present)")
		}
		rs := make([]*run, 0, len(m))
		for _, x := range m {
			if x.start.T == 0 { // an end without its start: the start was recorded first, always
				x.start = *x.end
			}
			rs = append(rs, x)
		}
		// In claim order: a run claimed first may start later (its worker
		// stalled between the claim and the handler).
		slices.SortFunc(rs, func(a, b *run) int {
			return cmp.Or(cmp.Compare(a.start.Attempt, b.start.Attempt), cmp.Compare(a.start.T, b.start.T))
		})
		r.Executions += len(rs)
		attempts := map[int]bool{}
		for i, cur := range rs {
			if e := cur.start; e.Claimed > 0 && e.Claimed < e.Due {
				r.Early++
				r.example("early", fmt.Sprintf("%s: attempt %d claimed on %s at %s by Redis's clock, due %s (enqueue answered %s)",
					id, e.Attempt, e.Slot, stampMs(e.Claimed), stampMs(e.Due), stampMs(ackedIDs[id].Due)))
			}
			if e := cur.start; e.Node != "" {
				r.NodeRuns++
				if want := parentsOf(e.Node); !slices.Equal(e.Up, want) {
					r.EarlyReleases++
					r.example("early_release", fmt.Sprintf("%s: node %s attempt %d ran with the upstream of %v, its parents are %v",
						id, e.Node, e.Attempt, e.Up, want))
				}
			}
			if attempts[cur.start.Attempt] {
				r.AttemptReuse++
				r.example("attempt_reuse", fmt.Sprintf("%s: attempt %d ran under two tokens", id, cur.start.Attempt))
			}
			attempts[cur.start.Attempt] = true
			if i == 0 {
				continue
			}
			prev := rs[i-1]
			if retried(outcomes[prev.start.Token]) {
				r.Retries++
				continue
			}
			r.Duplicates++
			if prev.end != nil && cur.end != nil && max(prev.start.T, cur.start.T) < min(prev.end.T, cur.end.T) {
				r.Concurrent++
			}
			if k := explainedBy(rec.Faults, prev.start, cur.start); k != "" {
				r.DuplicatesExplained++
				r.DuplicatesByFault[k]++
				if observed(k) {
					r.ExplainedByStall++
				}
			} else {
				r.Unexplained++
				r.example("unexplained_duplicate", fmt.Sprintf("%s: attempt %d claimed on %s at %s, ran at %s; attempt %d on %s ran at %s",
					id, prev.start.Attempt, prev.start.Slot, stamp(prev.start.Claimed), stamp(prev.start.T), cur.start.Attempt, cur.start.Slot, stamp(cur.start.T)))
			}
		}
	}
	// A completed job was completed by a run that ended well.
	for _, js := range snap.Jobs {
		if js.Status != "completed" {
			continue
		}
		x := runs[js.ID][js.Token]
		if x == nil || x.end == nil || x.end.Err != "" {
			r.GhostCompletions++
			r.example("ghost_completion", js.ID+" completed under token "+js.Token+" with no successful run recorded")
		}
	}

	// What is left in Redis.
	var stCompleted, stDead, stEnq int64
	for _, q := range slices.Sorted(maps.Keys(snap.Queues)) {
		qs := snap.Queues[q]
		r.Queues = append(r.Queues, q)
		r.LeftScheduled += qs.Scheduled
		r.LeftPending += qs.Pending
		r.LeftLeases += qs.Leases
		stCompleted += qs.Stats["completed"]
		stDead += qs.Stats["dead"]
		stEnq += qs.Stats["enqueued"]
		for _, id := range qs.DeadIDs {
			if snap.Jobs[id] == nil {
				r.Orphans++
				r.example("orphan", id+": in the dead set of "+q+" with no job")
			}
		}
	}
	var nCompleted, nDead int64
	for _, js := range snap.Jobs {
		switch js.Status {
		case "completed":
			nCompleted++
		case "dead":
			nDead++
		}
	}
	if stCompleted != nCompleted {
		r.StatsMismatch = append(r.StatsMismatch, fmt.Sprintf("stats completed %d, completed jobs %d", stCompleted, nCompleted))
	}
	if stDead != nDead {
		r.StatsMismatch = append(r.StatsMismatch, fmt.Sprintf("stats dead %d, dead jobs %d", stDead, nDead))
	}
	if stEnq != int64(len(snap.Jobs)) {
		r.StatsMismatch = append(r.StatsMismatch, fmt.Sprintf("stats enqueued %d, jobs %d", stEnq, len(snap.Jobs)))
	}
	r.Markers, r.OtherKeys = snap.Markers, snap.Other

	for _, byClass := range rec.Errors {
		for class, n := range byClass {
			if IsForbidden(class) {
				r.ForbiddenErrors += n
			}
			if class != "lease_lost" {
				r.CallerErrors += n
			}
		}
	}
	r.ErrorSamples = rec.Samples
	r.judge()
	return r
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
