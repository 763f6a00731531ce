// Package chaos is chronoq's fault-injection battery: it runs the real
// processes on loopback, breaks them on purpose while jobs flow, and then
// counts every job, the way Jepsen's queue checker does. A job queue makes
// one promise — a job it accepted is run, and not lost, whatever crashes —
// and this package is the proof of it, in figures.
//
// Run it with `make chaos-short` (CI form, about 3 minutes) or `make chaos`
// (full size); the program is cmd/chronoq-chaos. It prints one table, a
// column per scenario, then for each scenario the faults injected, the
// errors its processes saw by class, and every failure with example job
// ids; -json FILE writes the same reports as JSON ([Report]). Logs, AOF
// files and the ledger (as ledger.json) stay in the run's directory when a
// scenario fails.
//
// # The processes
//
// Every scenario starts, each in its own temporary directory and on free
// loopback ports:
//
//   - the queue's Redis: one redis-server with appendonly yes and
//     appendfsync always (an acknowledged write survives SIGKILL), or a
//     Redis Cluster of 3 masters with a replica each, every node durable;
//   - the ledger: a second redis-server, never faulted, where every other
//     process writes what it saw (see [Ledger]);
//   - two `chronoq serve` instances (promoter and reclaimer; their HTTP API
//     is idle), with a short --reclaim-interval;
//   - worker processes (cmd/chronoq-chaos worker): the Go worker runtime
//     with a handler that records the start and the end of every run — job
//     id, attempt, claim token, worker slot and pid, times — and always
//     fails poison jobs; every outcome the store gives (worker OnOutcome)
//     and every error the runtime logs is recorded too;
//   - a producer process (cmd/chronoq-chaos producer) that enqueues the
//     jobs one Enqueue call each, recording every try before it is made and
//     every acknowledgement (Enqueue returned nil) after. Each job carries
//     the try's sequence number in its payload, so a job whose enqueue reply
//     was lost can still be recognised.
//
// Every child dies with the battery (Pdeathsig SIGKILL, from one locked OS
// thread so that it means the process, not a thread) and runs in its own
// process group; all are stopped at the end. Every load loop and every wait
// is bounded in count and in time.
//
// # The scenarios
//
//   - single: one durable redis-server. Every few seconds a worker is
//     SIGKILLed and restarted, another is SIGSTOPped past its visibility
//     timeout (and two reclaim sweeps) and then resumed; redis-server is
//     SIGKILLed and restarted on the same AOF twice.
//   - cluster: the same load and worker faults on Redis Cluster, with
//     queues chosen so that their slots lie on every master; a replica takes
//     over its master with CLUSTER FAILOVER under load (twice), a master is
//     SIGKILLed and restarted before its node timeout, and SCRIPT FLUSH runs
//     on every node every few seconds.
//   - client: workers and producer talk to Redis through in-process TCP
//     proxies ([Proxy]) that, at random moments (each proxy about every
//     0.4 s in the short form, 0.7 s at full size), let a request reach Redis
//     and then cut the connection before its reply comes back — the case
//     go-redis retries, so the case where every script must be safe to run
//     twice. Now and then (every 5 s short, 10 s full) a proxy drops every
//     reply for 1.5 s, longer than go-redis's retries last, so the error
//     reaches the caller after the command may have run (an enqueue that
//     exists without its acknowledgement, a completion the worker thinks
//     failed). SCRIPT FLUSH runs every few seconds.
//   - reshard: the cluster, the same load, and no fault but slot
//     migrations: the first queue's slot moves to another
//     master and back, a round trip about every 2 s (4 s at full size),
//     by hand and slowly, 10 keys a MIGRATE with 10 ms between steps, as
//     redisproc.MigrateSlot does it (IMPORTING, MIGRATING, GETKEYSINSLOT
//     and MIGRATE until the source is empty, SETSLOT NODE on every master);
//     each move (a fraction of a second to several seconds, the slot
//     holding hundreds to thousands of keys) runs to its end, so the slot
//     ends where it began. While a slot moves, Redis answers ASK for a key
//     the source no longer has, TRYAGAIN for a command whose keys are split
//     between the masters, and a script that touches a key of another
//     node fails there, after its earlier writes. A caller may see
//     latency, never an error: here every error that reaches a caller (of
//     any class but a stale token's refusal) fails the scenario.
//   - skew: one durable redis-server, and every chronoq process on a
//     clock that is wrong (package internal/clockskew; serve reads the
//     test-only variable CHRONOQ_CLOCK_SKEW, a worker its configuration):
//     the two serve instances, promoters and reclaimers, 5 min ahead and
//     5 min behind, the workers 30 s ahead, 30 s behind, 5 min ahead (and
//     5 min behind at full size). Redis's clock, the host's, decides every
//     time, so none of them may claim or promote a job early, and the
//     reclaimer ahead may take no lease its worker keeps alive (a lease it
//     took from a heartbeating worker would show as a duplicate run no
//     fault explains). Meanwhile workers are SIGKILLed and SIGSTOPped as
//     in single, and redis-server is SIGKILLed and restarted once.
//   - workflow: one durable redis-server; the producer enqueues workflows
//     (package workflow), diamonds of four jobs (a, then b and c, then d,
//     on_failure "continue"), each job numbered as any other; the serve
//     instances' releasers release the children. Workers are SIGKILLed
//     and SIGSTOPped as in single, and every couple of seconds a serve
//     instance is SIGKILLed wherever its releaser was (between recording
//     an end, releasing the children and acking the outbox entry) and a new
//     one started (serve-kill). Every job of every acknowledged workflow
//     must complete (lost 0); the drain also waits for the outboxes to
//     empty. Each run of a node records the parents its upstream names,
//     which must be all of its node's (early releases 0): a child released
//     before its last parent ended would miss one. (That no child is
//     released twice is checked where it can be counted, by the workflow
//     package's crash tests and battery: a second release would make no
//     second run here, a claim drops a job that is not pending; a second
//     run would be a duplicate no fault explains.) 8,000 jobs over 40 s;
//     short 1,600 over 12 s.
//   - flow: the cluster, and every job carrying a flow key (20 keys; one
//     job in four k00's, the rest round the others), all in one queue, the
//     one whose slot moves; the queue's FlowLimits hold each key to 2 jobs
//     processing, and an override holds k00 to 5. Workers are SIGKILLed
//     mid-job as in single (their jobs count against their keys until
//     their leases lapse) while the queue's slot moves between masters as
//     in reshard (a round trip about every 4 s, 3 s short). An observer
//     reads every key's processing jobs (FlowKeys, the engine's own count)
//     every 20 ms from the start of the load to the end of the drain; no
//     sample may show a key over its limit. From the ledger, each key's
//     runs are swept in time order, a run under way from its start to its
//     end or to its worker's SIGKILL: no run may begin while its key has
//     its limit of runs under way (a handler runs inside its job's lease,
//     so this count is never above the engine's), but where one of them
//     had lost its lease (its outcome refused as a stale token: the engine
//     rightly stopped counting it), counted as explained. Every run must
//     carry the flow key its enqueue gave, and no key may have work left
//     after the drain. Lost 0, as everywhere. 8,000 jobs over 40 s, delayed
//     0–20 s; short 1,500 over 10 s, delayed 0–4 s (about 25 s).
//
// The full size is 20,000 jobs over 60 s, half of them delayed 0–60 s
// (skew's: 10,000 over 30 s, delayed 0–30 s); the short form 3,000 over
// 15 s, delayed 0–10 s (reshard's: 2,000 over 12 s, delayed 0–8 s; skew's:
// 1,500 over 8 s, delayed 0–6 s). One job in 50 is poison: it
// always fails, has 3 attempts and a 200 ms backoff, so it dies within the
// run. Ordinary jobs have 25 attempts, a 2 s visibility and heartbeats
// every third of it; their handlers work from 2 ms to 2.5 s. Faults run for
// the load's duration plus the longest delay, then stop, and the battery
// waits (bounded) until nothing is scheduled, pending, processing or
// leased.
//
// Every fault is recorded in the ledger with its time window and its
// target: a worker slot or the producer (worker-kill, worker-stop,
// proxy-drop, proxy-blackout), a serve instance (serve-kill) or everyone (redis-kill, master-restart,
// failover, script-flush, slot-migration). Stalls nobody injected are recorded too: each
// worker notes when its own timers ran more than 300 ms late (the process
// did not run: a starved machine), and Redis's latency monitor notes
// fsyncs and commands slower than 250 ms.
//
// # The figures
//
// [Check] reads the ledger and the queue's Redis at the end and counts:
//
//   - enqueues tried, and enqueued (acknowledged): the jobs promised.
//   - unacknowledged but present: tries whose Enqueue failed (its reply was
//     lost, Redis went away) but whose job exists. Allowed: the producer was
//     not told yes, and the job is run like any other.
//   - completed, dead: acknowledged jobs whose hash ends completed, or dead
//     (and in the dead set). "Of them ordinary jobs" counts dead jobs that
//     are not poison, which no fault here can explain (25 attempts).
//   - lost: acknowledged jobs neither completed nor dead — the hash is
//     gone, or still scheduled, pending or processing after the drain.
//     Must be 0.
//   - unexpected: jobs or runs never asked for — a job whose sequence
//     number was never tried, a second job for one try, a run of a job that
//     was neither acknowledged nor present. Must be 0.
//   - early: runs claimed before their job was due, by Redis's clock: the
//     claim's claimed_at before the run_at the job had when it was claimed
//     (its enqueue's due time, or a retry's). Both are Redis's times, to
//     the millisecond; the worker records them at the start of each run.
//     Must be 0. (Not against the run_at the enqueue answered, which the
//     ledger keeps too: when go-redis resends an enqueue whose reply was
//     lost, the answer carries the rerun's now, some milliseconds after
//     the job was made, and so a due time later than the job's.)
//   - early releases: runs of a workflow node (the workflow scenario)
//     whose upstream does not name every parent of the node. Must be 0.
//   - runs: handler executions, one per claim token that reached the
//     handler.
//   - retries after an accepted failure: a run that follows a run whose
//     failure the store accepted (a poison job's next attempt). Normal.
//   - duplicate runs: any other run after the first — the job ran again
//     although its previous run was never failed. Runs are taken in claim
//     order (attempt number): a run claimed first may start later, when its
//     worker was stopped between the claim and the handler. At-least-once
//     delivery allows a duplicate only where a fault explains it: a fault
//     whose window meets the time from the earlier run's claim to the later
//     run's start and that struck the earlier run's worker (killed, stopped,
//     its connection cut) or everyone (Redis killed, a node restarted, a
//     failover, a slot moved). A SCRIPT FLUSH explains nothing. Injected
//     faults are looked for first; a duplicate only an observed stall
//     explains is counted as such, visibly (a lease is a timeout: a
//     process that does not run for longer than its visibility loses its
//     job, injected or not). "Overlapping" counts duplicates where both runs were under way
//     at once (a stopped worker resumed). Unexplained: must be 0.
//   - stale-token writes refused: completes, fails and heartbeats the store
//     answered with ErrLeaseLost (the fencing at work: a worker whose job
//     was taken back can change nothing).
//   - completions without a good run: completed jobs whose final claim
//     token has no successful run in the ledger; jobs completed twice:
//     more than one completion accepted, or one accepted for a token that
//     no longer holds the job; attempt numbers reused: two tokens of a job
//     with the same attempt number. All must be 0.
//   - poison jobs, and of them those dead with exactly their max attempts
//     (3): must be all of them.
//   - left: entries in the scheduled, pending or leases
//     structures after the drain; orphaned jobs: jobs that are not
//     completed with an expiry or dead in the dead set, and dead-set ids
//     without a job. All must be 0. Claim retry markers (kept until one of
//     the claim's jobs is acked) are listed, not judged.
//   - the queues' stats counters must agree with the jobs found (completed,
//     dead, enqueued).
//   - forbidden errors at callers: CROSSSLOT, MOVED, ASK, NONLOCAL (a
//     script that touched a key it did not declare, on another node),
//     NOSCRIPT or UNBLOCKED errors seen by workers, producer or serve. Must
//     be 0. Other errors (connection refused while Redis is down, LOADING,
//     CLUSTERDOWN while a node restarts) are counted by class and
//     reported: they are the outage, not a broken promise.
//   - errors at callers, every class: all of them but ErrLeaseLost (the
//     fencing, counted above). Reported; must be 0 in reshard, whose only
//     fault, a slot migration, is no outage.
//   - flow (the flow scenario only; "-" elsewhere): samples of every key's
//     in-flight count; of them over the key's limit (must be 0); runs
//     begun over their key's limit (must be 0), and those a lapsed lease
//     explains; runs whose flow key is not their enqueue's (must be 0);
//     keys with work left after the drain (must be 0). Under the table,
//     the most in flight seen and the most runs under way, k00's and the
//     others' largest, and the samples whose read failed (a slot moving).
//
// A scenario fails, and the program exits non-zero, when any figure that
// must be 0 is not, or when a process of the battery died on its own or
// the queues did not drain in time.
//
// # Limits
//
// Only a coordinated CLUSTER FAILOVER is injected: an automatic failover
// after a master crash can lose writes the master acknowledged but had not
// yet sent to its replica (Redis replication is asynchronous), whatever
// chronoq does. Redis's clock is the one machine's: the skew scenario
// skews the chronoq processes' clocks, not Redis's, and no failover there
// moves a queue to a master whose clock differs. The ledger's times (runs,
// faults) are the machine's true clock in every process. The worker
// runtime claims with claim.lua and waits with WaitPending, never with a
// blocking Claim (the queue's contract tests cover that).
package chaos
