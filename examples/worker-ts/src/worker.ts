// A chronoq worker over the HTTP API. Every request and answer is typed by
// schema.d.ts, which openapi-typescript generates from api/openapi.json
// (npm run generate); openapi-fetch sends them. The protocol is
// docs/API.md, "Working over HTTP": claim with a long poll, heartbeat at a
// third of the job's visibility, then complete or fail with the claim's
// token; 409 lease_lost means the job is no longer this worker's.
import { hostname } from "node:os";
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type ClaimedJob = components["schemas"]["ClaimedJob"];
type ProgressRequest = components["schemas"]["ProgressRequest"];

/** What a handler's signal is aborted with. */
export type AbortReason =
  /** The lease was lost (409 lease_lost, or the job is gone): another
   * worker may be running the job, and nothing this run sends counts. */
  | "lease_lost"
  /** Someone asked to cancel the job (DELETE of the job while it runs): the
   * worker ends it as canceled once the handler returns. */
  | "canceled";

export interface JobContext {
  /** Aborted, with an AbortReason, when the handler should give up. */
  signal: AbortSignal;
  /** Progress (percent 0 to 100), sent with the next heartbeat. */
  progress(percent: number, message?: string): void;
}

/** Runs one job; what it returns (any JSON) is the job's result. Throwing
 * fails the job: it is retried after its backoff, or dead once its
 * attempts are spent (RetryAfter and Dead change that). */
export type Handler = (job: ClaimedJob, ctx: JobContext) => Promise<unknown>;

/** Thrown by a handler: retry the job after delay (a Go duration string,
 * "250ms", "30s"), whatever its backoff says. */
export class RetryAfter extends Error {
  constructor(
    readonly delay: string,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown by a handler: the job goes to the dead set at once, whatever
 * attempts it has left (retrying cannot fix it). */
export class Dead extends Error {}

export interface LogEvent {
  event: string;
  [field: string]: unknown;
}

export interface WorkerConfig {
  /** The server, "http://127.0.0.1:8080". */
  baseUrl: string;
  /** The bearer token of a server started with --token. */
  token?: string | undefined;
  /** The queue to work. */
  queue: string;
  /** A handler per job kind. A job of another kind fails and is retried:
   * another worker may know its kind. */
  handlers: Record<string, Handler>;
  /** Jobs run at once. Defaults to 4. */
  concurrency?: number | undefined;
  /** How long a claim waits for a job, 0 to 30s: the longest a stop waits
   * for the claim under way. Defaults to "5s". */
  pollWait?: string | undefined;
  /** The worker's labels: it receives jobs that require none, or only
   * labels among these. Defaults to none. */
  labels?: string[] | undefined;
  /** Its id in the worker registry (GET /v1/workers). Defaults to
   * "<host>-<pid>-ts". */
  workerId?: string | undefined;
  /** Shown in the registry. Defaults to "worker-ts". */
  version?: string | undefined;
  /** Where events go. Defaults to one JSON object a line on stdout. */
  log?: ((e: LogEvent) => void) | undefined;
}

/** How long a call that failed for a passing reason (the network, a 503
 * while Redis is away) waits before it is tried again: doubling from
 * 100 ms to 3.2 s. Complete and fail are tried 6 times: a retried call
 * answers as the first did, so sending one twice is harmless. */
const retryDelays = [100, 200, 400, 800, 1600, 3200];

const durationUnits: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Milliseconds of a Go duration string as the server writes them ("1m30s",
 * "250ms", "0s"). */
export function parseDuration(s: string): number {
  if (s === "0") return 0;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  while (part.lastIndex < s.length) {
    const at = part.lastIndex;
    const m = part.exec(s);
    if (m === null || m.index !== at) throw new Error(`not a duration: ${JSON.stringify(s)}`);
    ms += Number(m[1]) * (durationUnits[m[2] ?? ""] ?? NaN);
  }
  if (s === "" || !Number.isFinite(ms)) throw new Error(`not a duration: ${JSON.stringify(s)}`);
  return ms;
}

/** The error code of an answer's body ({"error":{"code"}}), if it has one. */
function errorCode(body: unknown): string | undefined {
  if (typeof body === "object" && body !== null && "error" in body) {
    const e = body.error;
    if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "string") return e.code;
  }
  return undefined;
}

/** Whether an answer's status is worth trying again: the server, or Redis
 * behind it, away for a moment (0: no answer came). */
function passing(status: number): boolean {
  return status === 0 || status >= 500;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** An outcome call's answer that tells the job is no longer this worker's. */
function lost(status: number, body: unknown): boolean {
  return status === 404 || (status === 409 && errorCode(body) === "lease_lost");
}

/** A WorkerConfig with its defaults filled in. */
interface Settings {
  queue: string;
  handlers: Record<string, Handler>;
  concurrency: number;
  pollWait: string;
  labels: string[];
  workerId: string;
  version: string;
  log: (e: LogEvent) => void;
}

export class Worker {
  private readonly api;
  private readonly cfg: Settings;
  private readonly running = new Set<Promise<void>>();
  private stopping = false;
  private wake: (() => void) | undefined;

  constructor(cfg: WorkerConfig) {
    this.cfg = {
      queue: cfg.queue,
      handlers: cfg.handlers,
      concurrency: cfg.concurrency ?? 4,
      pollWait: cfg.pollWait ?? "5s",
      labels: cfg.labels ?? [],
      workerId: cfg.workerId ?? `${hostname()}-${process.pid}-ts`,
      version: cfg.version ?? "worker-ts",
      log: cfg.log ?? ((e) => process.stdout.write(JSON.stringify({ time: new Date().toISOString(), ...e }) + "\n")),
    };
    if (!Number.isInteger(this.cfg.concurrency) || this.cfg.concurrency < 1 || this.cfg.concurrency > 1000) {
      throw new Error(`concurrency must be 1 to 1000, got ${this.cfg.concurrency}`);
    }
    parseDuration(this.cfg.pollWait);
    this.api = createClient<paths>({
      baseUrl: cfg.baseUrl,
      headers: cfg.token ? { Authorization: `Bearer ${cfg.token}` } : {},
    });
  }

  /** Stops claiming; run() returns once the claim under way and the running
   * jobs are done. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.cfg.log({ event: "stopping", running: this.running.size });
    this.wake?.();
  }

  /** Claims and runs jobs until stop(); then lets the running jobs finish
   * and deregisters. It throws only on a request the server refuses as
   * invalid (a bad queue name or label: the configuration is wrong). */
  async run(): Promise<void> {
    const { queue, workerId } = this.cfg;
    await this.register();
    this.cfg.log({ event: "started", worker_id: workerId, queue });
    let failures = 0;
    while (!this.stopping) {
      const free = this.cfg.concurrency - this.running.size;
      if (free === 0) {
        await this.pause(Promise.race(this.running));
        continue;
      }
      let answer;
      try {
        answer = await this.api.POST("/v1/queues/{queue}/claim", {
          params: { path: { queue } },
          body: { wait: this.cfg.pollWait, max: free, labels: this.cfg.labels, worker_id: workerId },
        });
      } catch (err) {
        // fetch's own error: the server is out of reach.
        await this.backOff(failures++, { event: "claim_error", error: describe(err) });
        continue;
      }
      const { data, error, response } = answer;
      if (data === undefined) {
        // 409 conflict: the registry has no room for this worker now. Any
        // other 4xx (400, 401) is a configuration no retry can fix.
        if (!passing(response.status) && response.status !== 409) {
          throw new Error(`claim answered ${response.status}: ${JSON.stringify(error)}`);
        }
        await this.backOff(failures++, { event: "claim_error", status: response.status, error });
        continue;
      }
      failures = 0;
      const jobs = data.jobs;
      for (const job of jobs) {
        const p = this.runJob(job).finally(() => this.running.delete(p));
        this.running.add(p);
      }
    }
    this.cfg.log({ event: "draining", running: this.running.size });
    await Promise.all(this.running);
    await this.deregister();
    this.cfg.log({ event: "stopped", worker_id: workerId });
  }

  /** Logs e, then waits before the next claim (or until stop()). */
  private async backOff(failures: number, e: LogEvent): Promise<void> {
    this.cfg.log(e);
    const delay = retryDelays[Math.min(failures, retryDelays.length - 1)] ?? 0;
    await this.pause(new Promise((r) => setTimeout(r, delay)));
  }

  /** Waits for p, or until stop(). */
  private async pause(p: Promise<unknown>): Promise<void> {
    await Promise.race([p, new Promise<void>((r) => (this.wake = r))]);
    this.wake = undefined;
  }

  private async register(): Promise<void> {
    const { workerId, queue, labels, version } = this.cfg;
    try {
      const { error, response } = await this.api.PUT("/v1/workers/{id}", {
        params: { path: { id: workerId } },
        body: { host: hostname(), queues: [queue], labels, version },
      });
      if (error !== undefined) this.cfg.log({ event: "register_error", status: response.status, error });
    } catch (err) {
      // Its first claim registers it too.
      this.cfg.log({ event: "register_error", error: describe(err) });
    }
  }

  private async deregister(): Promise<void> {
    try {
      await this.api.DELETE("/v1/workers/{id}", { params: { path: { id: this.cfg.workerId } } });
    } catch (err) {
      // It expires at its TTL all the same.
      this.cfg.log({ event: "deregister_error", error: describe(err) });
    }
  }

  private async runJob(job: ClaimedJob): Promise<void> {
    const { queue, workerId } = this.cfg;
    const path = { params: { path: { queue, id: job.id } } };
    const fields = { job: job.id, kind: job.kind, attempt: job.attempts, fence: job.fence };
    this.cfg.log({ event: "claimed", ...fields });
    const abort = new AbortController();
    let progress: ProgressRequest | undefined;
    let done = false;

    // Heartbeats, one at a time, a third of the visibility apart.
    const every = parseDuration(job.visibility) / 3;
    let timer: NodeJS.Timeout | undefined;
    const beat = async (): Promise<void> => {
      const sent = progress;
      progress = undefined;
      let delivered = false;
      try {
        const { data, error, response } = await this.api.POST("/v1/queues/{queue}/jobs/{id}/heartbeat", {
          ...path,
          body: { token: job.token, worker_id: workerId, ...(sent ? { progress: sent } : {}) },
        });
        delivered = data !== undefined;
        if (done) return;
        if (data?.cancel_requested && !abort.signal.aborted) abort.abort("canceled" satisfies AbortReason);
        else if (data === undefined && lost(response.status, error)) abort.abort("lease_lost" satisfies AbortReason);
        else if (data === undefined) this.cfg.log({ event: "heartbeat_error", ...fields, status: response.status, error });
      } catch (err) {
        // The lease holds for a while yet: the next beat may pass.
        this.cfg.log({ event: "heartbeat_error", ...fields, error: describe(err) });
      }
      if (!delivered) progress ??= sent;
      // A canceled job keeps its lease until its handler returns.
      if (!done && abort.signal.reason !== "lease_lost") timer = setTimeout(beat, every);
    };
    timer = setTimeout(beat, every);

    const ctx: JobContext = {
      signal: abort.signal,
      progress: (percent, message) => {
        progress = message === undefined ? { percent } : { percent, message };
      },
    };
    let outcome: { result: unknown } | { error: unknown };
    try {
      const handler = this.cfg.handlers[job.kind];
      if (handler === undefined) throw new Error(`no handler for kind ${JSON.stringify(job.kind)}`);
      outcome = { result: await handler(job, ctx) };
    } catch (err) {
      outcome = { error: err };
    } finally {
      done = true;
      clearTimeout(timer);
    }

    if (abort.signal.reason === "lease_lost") {
      this.cfg.log({ event: "lease_lost", ...fields, via: "heartbeat" });
      return;
    }
    if (abort.signal.reason === "canceled") {
      const { status } = await this.send(() => this.api.POST("/v1/queues/{queue}/jobs/{id}/cancel", { ...path, body: { token: job.token, worker_id: workerId } }));
      this.cfg.log({ event: status === 200 ? "canceled" : "cancel_error", ...fields, status });
      return;
    }
    if ("result" in outcome) {
      if (progress !== undefined) {
        // The last progress, so that the job keeps it: one more heartbeat.
        try {
          await this.api.POST("/v1/queues/{queue}/jobs/{id}/heartbeat", { ...path, body: { token: job.token, worker_id: workerId, progress } });
        } catch (err) {
          this.cfg.log({ event: "heartbeat_error", ...fields, error: describe(err) });
        }
      }
      const result = outcome.result === undefined ? null : outcome.result;
      const { status, error } = await this.send(() =>
        this.api.POST("/v1/queues/{queue}/jobs/{id}/complete", { ...path, body: { token: job.token, result, worker_id: workerId } }),
      );
      if (status === 200 || status === 204) this.cfg.log({ event: "completed", ...fields });
      else if (lost(status, error)) this.cfg.log({ event: "lease_lost", ...fields, via: "complete" });
      else this.cfg.log({ event: "complete_error", ...fields, status, error });
      return;
    }
    const err = outcome.error;
    const body: components["schemas"]["Fail"] = { token: job.token, error: describe(err), worker_id: workerId };
    if (err instanceof RetryAfter) body.retry_after = err.delay;
    if (err instanceof Dead) body.dead = true;
    const { status, error } = await this.send(() => this.api.POST("/v1/queues/{queue}/jobs/{id}/fail", { ...path, body }));
    if (status === 200 || status === 204) this.cfg.log({ event: "failed", ...fields, error: body.error, ...(body.dead ? { dead: true } : {}) });
    else if (lost(status, error)) this.cfg.log({ event: "lease_lost", ...fields, via: "fail" });
    else this.cfg.log({ event: "fail_error", ...fields, status, error });
  }

  /** Sends an outcome (complete, fail, cancel), again while it fails for a
   * passing reason: a retried outcome answers as the first one did. */
  private async send(call: () => Promise<{ error?: unknown; response: Response }>): Promise<{ status: number; error?: unknown }> {
    let last: { status: number; error?: unknown } = { status: 0 };
    for (const delay of [0, ...retryDelays]) {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      try {
        const { error, response } = await call();
        last = { status: response.status, error };
        if (!passing(response.status)) return last;
      } catch (err) {
        last = { status: 0, error: describe(err) };
      }
    }
    return last;
  }
}
