package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// throughput is one side's result in a jobs-per-second scenario.
type throughput struct {
	want, done int
	elapsed    time.Duration
	cpu        time.Duration // redis-server CPU (user + sys) over the run
	client     time.Duration // this process's CPU over the run (see selfCPU)
	incomplete bool          // stopped at the deadline, by an error, or by Ctrl-C
}

func (t throughput) perSec() float64 {
	if t.elapsed <= 0 || t.done == 0 {
		return 0
	}
	return float64(t.done) / t.elapsed.Seconds()
}

// cpuPerJob is redis-server's CPU µs per job.
func (t throughput) cpuPerJob() float64 {
	if t.done == 0 {
		return 0
	}
	return float64(t.cpu) / float64(time.Microsecond) / float64(t.done)
}

// clientPerJob is this process's CPU µs per job.
func (t throughput) clientPerJob() float64 {
	if t.done == 0 {
		return 0
	}
	return float64(t.client) / float64(time.Microsecond) / float64(t.done)
}

// delays is one side's result in a timing scenario: how late each job ran
// (negative: early), sorted.
type delays struct {
	want       int
	d          []time.Duration
	incomplete bool
}

func newDelays(want int, d []time.Duration, incomplete bool) delays {
	slices.Sort(d)
	return delays{want: want, d: d, incomplete: incomplete || len(d) < want}
}

// pct is the nearest-rank percentile p (0 < p ≤ 1).
func (s delays) pct(p float64) (time.Duration, bool) {
	if len(s.d) == 0 {
		return 0, false
	}
	i := int(math.Ceil(p*float64(len(s.d)))) - 1
	return s.d[min(max(i, 0), len(s.d)-1)], true
}

func (s delays) early() int {
	n, _ := slices.BinarySearch(s.d, 0) // the first index not below zero
	return n
}

// memory is one side's result in the memory scenario.
type memory struct {
	want, done int
	bytes      int64 // used_memory after − before
	incomplete bool
}

func (m memory) perJob() float64 {
	if m.done == 0 {
		return 0
	}
	return float64(m.bytes) / float64(m.done)
}

// counter counts finished jobs and notes when the count reached want.
type counter struct {
	want int64
	n    atomic.Int64
	once sync.Once
	end  time.Time // set before done closes
	done chan struct{}
}

func newCounter(want int) *counter { return &counter{want: int64(want), done: make(chan struct{})} }

func (c *counter) add(k int) {
	if c.n.Add(int64(k)) >= c.want {
		c.once.Do(func() {
			c.end = time.Now()
			close(c.done)
		})
	}
}

// sampler records one delay per job index, the first time it is seen (a
// job delivered twice counts once), and closes done when every job has one.
type sampler struct {
	want int
	seen []atomic.Bool
	val  []atomic.Int64
	n    atomic.Int64
	once sync.Once
	done chan struct{}
}

func newSampler(want int) *sampler {
	return &sampler{want: want, seen: make([]atomic.Bool, want), val: make([]atomic.Int64, want), done: make(chan struct{})}
}

func (s *sampler) record(i int, d time.Duration) {
	if i < 0 || i >= s.want || !s.seen[i].CompareAndSwap(false, true) {
		return
	}
	s.val[i].Store(int64(d))
	if s.n.Add(1) == int64(s.want) {
		s.once.Do(func() { close(s.done) })
	}
}

// collect returns the delays recorded so far; call it once the handlers
// have stopped.
func (s *sampler) collect(incomplete bool) delays {
	d := make([]time.Duration, 0, s.want)
	for i := range s.want {
		if s.seen[i].Load() {
			d = append(d, time.Duration(s.val[i].Load()))
		}
	}
	return newDelays(s.want, d, incomplete)
}

// table is the printed result: scenario | chronoq | asynq | ratio.
type table struct {
	rows       [][4]string
	incomplete bool
}

func (t *table) add(scenario, c, a, ratio string) {
	t.rows = append(t.rows, [4]string{scenario, c, a, ratio})
}

func (t *table) print(w io.Writer) {
	head := [4]string{"scenario", "chronoq", "asynq", "ratio"}
	width := [4]int{}
	for _, r := range append([][4]string{head}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(r [4]string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i == 0 {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			} else {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(head)
	sep := [4]string{}
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	fmt.Fprintln(w, "|-"+sep[0]+"-|-"+sep[1]+":|-"+sep[2]+":|-"+sep[3]+":|")
	for _, r := range t.rows {
		line(r)
	}
}

// Cell formats; table.star marks a figure from an incomplete run.

// thousands formats x rounded, with thin grouping commas.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dur formats a lateness: ms with 3 decimals under 10 ms, then fewer.
func dur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(ms); {
	case a < 10:
		return fmt.Sprintf("%.3f ms", ms)
	case a < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%s ms", thousands(ms))
	}
}

// times formats a ratio.
func times(r float64) string {
	switch {
	case r >= 100:
		return thousands(r) + "×"
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// higherBetter is chronoq/asynq; lowerBetter is asynq/chronoq: either way
// a ratio above 1 says chronoq did better.
func higherBetter(c, a float64) string {
	if c <= 0 || a <= 0 {
		return "n/a"
	}
	return times(c/a) + " (c/a)"
}

func lowerBetter(c, a float64) string {
	if c <= 0 || a <= 0 {
		return "n/a"
	}
	return times(a/c) + " (a/c)"
}
