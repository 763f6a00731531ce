// The example worker: four job kinds that show what a handler can do, run
// by Worker (worker.ts) on one queue until SIGTERM or SIGINT. Configured by
// the environment:
//
//	CHRONOQ_URL          the server (default http://127.0.0.1:8080)
//	CHRONOQ_TOKEN        its bearer token, when it has one
//	CHRONOQ_QUEUE        the queue to work (default "default")
//	CHRONOQ_CONCURRENCY  jobs at once (default 4)
//	CHRONOQ_POLL_WAIT    a claim's long poll, 0 to 30s (default 5s)
//	CHRONOQ_WORKER_ID    its id in the worker registry (default <host>-<pid>-ts)
import { setTimeout as sleep } from "node:timers/promises";
import { Dead, type Handler, RetryAfter, Worker } from "./worker.js";

/** The payload as an object, whatever JSON it is. */
function fields(payload: unknown): Record<string, unknown> {
  return typeof payload === "object" && payload !== null ? (payload as Record<string, unknown>) : {};
}

const handlers: Record<string, Handler> = {
  // A result: {"name":"Ada"} completes with {"greeting":"Hello, Ada!"}.
  greet: async (job) => {
    const { name } = fields(job.payload);
    if (typeof name !== "string") throw new Dead("payload.name must be a string");
    return { greeting: `Hello, ${name}!` };
  },

  // Failing, then succeeding: {"fail_times":1} fails its first attempt
  // (retried after the job's backoff), {"fail_times":1,"retry_after":"200ms"}
  // asks for its retry 200 ms later instead.
  flaky: async (job) => {
    const { fail_times: failTimes = 1, retry_after: retryAfter } = fields(job.payload);
    if (typeof failTimes !== "number") throw new Dead("payload.fail_times must be a number");
    if (job.attempts <= failTimes) {
      const message = `attempt ${job.attempts} of ${failTimes + 1} fails on purpose`;
      throw typeof retryAfter === "string" ? new RetryAfter(retryAfter, message) : new Error(message);
    }
    return { attempts: job.attempts };
  },

  // A long job: {"seconds":5} runs 5 s, past its visibility if need be (the
  // worker heartbeats meanwhile), reporting its progress each second, and
  // gives up when its lease is lost or the job is canceled.
  slow: async (job, { signal, progress }) => {
    const { seconds = 1 } = fields(job.payload);
    if (typeof seconds !== "number" || seconds < 0) throw new Dead("payload.seconds must be a number >= 0");
    for (let done = 0; done < seconds; done++) {
      await sleep(Math.min(1, seconds - done) * 1000, undefined, { signal });
      progress(Math.round((100 * (done + 1)) / Math.ceil(seconds)), `second ${done + 1} of ${Math.ceil(seconds)}`);
    }
    return { slept: seconds };
  },

  // A job no retry can fix: to the dead set at once.
  poison: async () => {
    throw new Dead("poison: this job can never succeed");
  },
};

function positiveInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

const worker = new Worker({
  baseUrl: process.env.CHRONOQ_URL || "http://127.0.0.1:8080",
  token: process.env.CHRONOQ_TOKEN || undefined,
  queue: process.env.CHRONOQ_QUEUE || "default",
  concurrency: positiveInt("CHRONOQ_CONCURRENCY", 4),
  pollWait: process.env.CHRONOQ_POLL_WAIT || undefined,
  workerId: process.env.CHRONOQ_WORKER_ID || undefined,
  handlers,
});
// A graceful stop: no more claims, the running jobs finish. A second
// signal ends the process at once (their leases lapse, and the reclaimer
// gives their jobs to another worker).
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    process.on(signal, () => process.exit(130));
    worker.stop();
  });
}
await worker.run();
