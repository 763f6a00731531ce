package main

import (
	"context"
	"fmt"
	"github.com/chronoq/chronoq/internal/store"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Phases: where Redis spends its CPU per job, split by the step of a
// job's life a command belongs to. INFO cpu cannot tell the scripts apart
// (they are all EVALSHA), so a second, separate pass of the same flow logs
// every command in the slow log (slowlog-log-slower-than 0): the script's
// Its name tells chronoq's scripts (store.ScriptCalled), the keys asynq's.
// The log has each command's execution time but not the CPU of reading it
// and writing its reply, nor the event loop's: that remainder (the pass's
// CPU less the execution times) is shared out by number of commands, and
// the resulting shares are applied to the CPU of the headline pass, which
// logged nothing (logging every command costs Redis a little).

type phase int

const (
	phaseEnqueue phase = iota
	phaseClaim
	phaseComplete
	phaseOther // every other command: waits, attention marks, heartbeats, asynq's own bookkeeping
	nPhases
)

var phaseNames = [nPhases]string{"enqueue", "claim", "complete", "other commands"}

// phases is what a split pass logged: by phase, the commands and their
// execution time, and the pass's Redis CPU.
type phases struct {
	exec  [nPhases]time.Duration
	calls [nPhases]int
	cpu   time.Duration
	ok    bool
}

// share is the part of Redis's CPU that went to ph.
func (p phases) share(ph phase) float64 {
	var exec time.Duration
	calls := 0
	for i := range nPhases {
		exec += p.exec[i]
		calls += p.calls[i]
	}
	if !p.ok || exec <= 0 || calls == 0 {
		return 0
	}
	if p.cpu <= exec { // the execution times are wall-clock: a busy machine inflates them
		return float64(p.exec[ph]) / float64(exec)
	}
	rest := float64(p.cpu-exec) * float64(p.calls[ph]) / float64(calls)
	return (float64(p.exec[ph]) + rest) / float64(p.cpu)
}

// perJob is x's Redis CPU per job that went to ph, by p's shares.
func (p phases) perJob(x throughput, ph phase) float64 { return x.cpuPerJob() * p.share(ph) }

// callsPerJob is how many commands of ph the split pass sent a job (a
// script call is one, whatever it calls): what the coalescing of each step
// saves shows here first.
func (p phases) callsPerJob(ph phase, jobs int) float64 {
	if !p.ok || jobs == 0 {
		return 0
	}
	return float64(p.calls[ph]) / float64(jobs)
}

// totalCallsPerJob is callsPerJob over every phase.
func (p phases) totalCallsPerJob(jobs int) float64 {
	var sum float64
	for ph := range nPhases {
		sum += p.callsPerJob(ph, jobs)
	}
	return sum
}

// slowlogOn logs every command from now on, up to max entries.
func slowlogOn(rdb *redis.Client, max int) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := rdb.ConfigSet(ctx, "slowlog-max-len", fmt.Sprint(max)).Err(); err != nil {
		return err
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return err
	}
	return rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err()
}

// slowlogOff stops logging and answers what was logged, and whether the
// log held it all.
func slowlogOff(rdb *redis.Client, max int) ([]redis.SlowLog, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err(); err != nil {
		return nil, false, err
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, false, err
	}
	_ = rdb.SlowLogReset(ctx).Err()
	_ = rdb.ConfigSet(ctx, "slowlog-max-len", "128").Err()
	return logs, len(logs) < max, nil
}

// split sums the logged commands by phase with classify. Commands a
// script called are logged too, with the address "?:0": their time is
// their script's already. So are this program's own (INFO, asynq's
// counter), from the control connection at ctlAddr.
func split(logs []redis.SlowLog, ctlAddr string, cpu time.Duration, classify func(args []string) phase) phases {
	p := phases{cpu: cpu, ok: true}
	for _, l := range logs {
		if len(l.Args) == 0 || l.ClientAddr == "?:0" || l.ClientAddr == ctlAddr {
			continue
		}
		ph := classify(l.Args)
		p.exec[ph] += l.Duration
		p.calls[ph]++
	}
	return p
}

// clientAddr is the address Redis sees for rdb's connection (one
// connection: the control client's pool is of one).
func clientAddr(rdb *redis.Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s, err := rdb.ClientInfo(ctx).Result()
	if err != nil {
		return ""
	}
	return s.Addr
}

// chronoqPhase tells chronoq's scripts by name (store.ScriptCalled: an
// EVALSHA's SHA1 or an FCALL's function).
func chronoqPhase() func(args []string) phase {
	return func(args []string) phase {
		name, _ := store.ScriptCalled(args...)
		switch name {
		case "enqueue":
			return phaseEnqueue
		case "claim":
			return phaseClaim
		case "complete":
			return phaseComplete
		}
		return phaseOther
	}
}

// asynqPhase tells asynq's scripts by their first two keys: its enqueue
// script takes the task's key and the pending list, its dequeue script
// the pending list first, and its done script the active list first.
func asynqPhase(args []string) phase {
	if len(args) < 5 || !strings.EqualFold(args[0], "evalsha") {
		return phaseOther
	}
	k1, k2 := args[3], args[4]
	switch {
	case strings.Contains(k1, ":t:") && strings.HasSuffix(k2, ":pending"):
		return phaseEnqueue
	case strings.HasSuffix(k1, ":pending"):
		return phaseClaim
	case strings.HasSuffix(k1, ":active"):
		return phaseComplete
	}
	return phaseOther
}
