package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// WriteTable prints the reports side by side, one column per scenario,
// then each scenario's faults, errors and failures.
func WriteTable(w io.Writer, rs []*Report) {
	var rows [][]string
	row := func(name string, f func(r *Report) string) {
		cells := []string{name}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		rows = append(rows, cells)
	}
	n := func(f func(r *Report) int) func(r *Report) string {
		return func(r *Report) string { return fmt.Sprint(f(r)) }
	}
	row("scenario", func(r *Report) string { return r.Scenario })
	row("duration", func(r *Report) string { return r.Duration.Round(time.Second).String() })
	row("enqueues tried", n(func(r *Report) int { return r.Attempted }))
	row("enqueued (acknowledged)", n(func(r *Report) int { return r.Enqueued }))
	row("unacknowledged but present", n(func(r *Report) int { return r.UnackedPresent }))
	row("completed", n(func(r *Report) int { return r.Completed }))
	row("dead", n(func(r *Report) int { return r.Dead }))
	row("  of them ordinary jobs", n(func(r *Report) int { return r.DeadNonPoison }))
	row("LOST", n(func(r *Report) int { return r.Lost }))
	row("UNEXPECTED", n(func(r *Report) int { return r.Unexpected }))
	row("EARLY (claimed before due, Redis's clock)", n(func(r *Report) int { return r.Early }))
	row("EARLY RELEASES (a workflow node before its parents)", n(func(r *Report) int { return r.EarlyReleases }))
	row("  workflow node runs checked", n(func(r *Report) int { return r.NodeRuns }))
	row("runs (handler executions)", n(func(r *Report) int { return r.Executions }))
	row("retries after an accepted failure", n(func(r *Report) int { return r.Retries }))
	row("duplicate runs", n(func(r *Report) int { return r.Duplicates }))
	row("  explained by a fault", n(func(r *Report) int { return r.DuplicatesExplained }))
	row("    of them by a stall only observed", n(func(r *Report) int { return r.ExplainedByStall }))
	row("  UNEXPLAINED", n(func(r *Report) int { return r.Unexplained }))
	row("  overlapping the first run", n(func(r *Report) int { return r.Concurrent }))
	row("stale-token writes refused", n(func(r *Report) int { return r.StaleRefused }))
	row("completions without a good run", n(func(r *Report) int { return r.GhostCompletions }))
	row("jobs completed twice", n(func(r *Report) int { return r.DoubleCompletions }))
	row("attempt numbers reused", n(func(r *Report) int { return r.AttemptReuse }))
	row("poison jobs", n(func(r *Report) int { return r.Poison }))
	row("  dead with exactly max attempts", n(func(r *Report) int { return r.PoisonOK }))
	row("  WRONG", n(func(r *Report) int { return r.PoisonWrong }))
	row("left: scheduled/pending", func(r *Report) string { return fmt.Sprintf("%d/%d", r.LeftScheduled, r.LeftPending) })
	row("left: leases", func(r *Report) string { return fmt.Sprint(r.LeftLeases) })
	row("jobs kept (completed/dead)", n(func(r *Report) int { return r.HashesKept }))
	row("orphaned jobs", n(func(r *Report) int { return r.Orphans }))
	row("claim retry markers left", n(func(r *Report) int { return r.Markers }))
	flow := func(f func(r *Report) int) func(r *Report) string {
		return func(r *Report) string {
			if r.FlowLimit == 0 {
				return "-"
			}
			return fmt.Sprint(f(r))
		}
	}
	row("flow: in-flight samples of every key", flow(func(r *Report) int { return r.FlowSamples }))
	row("  FLOW KEY OVER ITS MAX IN FLIGHT (samples)", flow(func(r *Report) int { return r.FlowOverSampled }))
	row("  FLOW RUNS BEGUN OVER THE MAX (handlers)", flow(func(r *Report) int { return r.FlowRunsOver }))
	row("    explained by a lapsed lease", flow(func(r *Report) int { return r.FlowRunsOverExplained }))
	row("  FLOW KEY WRONG (run vs enqueue)", flow(func(r *Report) int { return r.FlowWrongKey }))
	row("  flow keys with work left", flow(func(r *Report) int { return int(r.FlowKeysLeft) }))
	row("forbidden errors at callers", func(r *Report) string { return fmt.Sprint(r.ForbiddenErrors) })
	row("errors at callers, every class", func(r *Report) string { return fmt.Sprint(r.CallerErrors) })
	row("RESULT", func(r *Report) string {
		if r.Pass {
			return "PASS"
		}
		return "FAIL"
	})
	printTable(w, rows)
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s:\n", r.Scenario)
		if len(r.Placement) > 0 {
			fmt.Fprintf(w, "  queues on masters: %s\n", joinMap(r.Placement))
		} else {
			fmt.Fprintf(w, "  queues: %s\n", strings.Join(r.Queues, ", "))
		}
		if len(r.Clocks) > 0 {
			fmt.Fprintf(w, "  clocks off the true time: %s\n", joinMap(r.Clocks))
		}
		injected := maps.Clone(r.Faults)
		maps.DeleteFunc(injected, func(k string, _ int) bool { return observed(k) })
		fmt.Fprintf(w, "  faults injected: %s\n", joinCounts(injected))
		if len(r.Stalls) > 0 {
			fmt.Fprintf(w, "  stalls observed (not injected; worker-stop pauses included): %s; longest %s\n",
				joinCounts(r.Stalls), r.MaxStall.Round(time.Millisecond))
		}
		if r.FlowLimit > 0 {
			fmt.Fprintf(w, "  flow keys: max in flight %d, %s %d; most in flight seen (sampled) %s; most runs under way %s; %d samples failed\n",
				r.FlowLimit, FlowKeyOf(0, 2), r.FlowOverride, flowPeaks(r.FlowPeak), flowPeaks(r.FlowRunPeak), r.FlowSampleErrors)
		}
		if len(r.DropsByCommand) > 0 {
			fmt.Fprintf(w, "  connections dropped after the request, by request: %s\n", joinCounts(r.DropsByCommand))
		}
		if len(r.DuplicatesByFault) > 0 {
			fmt.Fprintf(w, "  duplicates explained by: %s\n", joinCounts(r.DuplicatesByFault))
		}
		for _, role := range slices.Sorted(maps.Keys(r.Errors)) {
			if len(r.Errors[role]) > 0 {
				fmt.Fprintf(w, "  errors seen by the %s: %s\n", role, joinCounts(r.Errors[role]))
			}
		}
		if len(r.OtherKeys) > 0 {
			fmt.Fprintf(w, "  other keys left: %v\n", r.OtherKeys)
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  FAILURE: %s\n", f)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Examples)) {
			for _, e := range r.Examples[k] {
				fmt.Fprintf(w, "  e.g. %s: %s\n", k, e)
			}
		}
	}
}

// flowPeaks is the first key's peak and the largest of the others'.
func flowPeaks(m map[string]int) string {
	first, others := FlowKeyOf(0, 2), 0
	for k, v := range m {
		if k != first {
			others = max(others, v)
		}
	}
	return fmt.Sprintf("%s %d, others %d", first, m[first], others)
}

func joinCounts[N int | int64](m map[string]N) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func joinMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" → "+m[k])
	}
	return strings.Join(parts, "; ")
}

// printTable prints rows with the first column left-aligned and the others
// right-aligned, a rule under the first row.
func printTable(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for n, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
		if n == 0 {
			fmt.Fprintln(w, strings.Repeat("-", len([]rune(b.String()))))
		}
	}
}
