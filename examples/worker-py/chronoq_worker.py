"""A chronoq worker over the HTTP API, on the standard library alone.

The protocol is docs/API.md, "Working over HTTP": claim with a long poll,
heartbeat at a third of the job's visibility, then complete or fail with
the claim's token; 409 lease_lost means the job is no longer this
worker's. The request and answer bodies are the dataclasses below, each
named after its schema in api/openapi.json (``SCHEMA``); test_models.py
checks them against the document.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import sys
import threading
import time
import typing
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

# --- The document's schemas -------------------------------------------------


@dataclass
class Backoff:
    SCHEMA: ClassVar[str] = "Backoff"
    initial: str
    factor: float
    max: str
    jitter: float


@dataclass
class ClaimedJob:
    """A job as a claim answers it, with its claim token."""

    SCHEMA: ClassVar[str] = "ClaimedJob"
    id: str
    queue: str
    kind: str
    payload: Any
    status: str
    attempts: int
    fence: int
    max_attempts: int
    backoff: Backoff
    visibility: str
    enqueued_at: str
    run_at: str
    claimed_at: Optional[str]
    lease_until: Optional[str]
    completed_at: Optional[str]
    result: Any
    last_error: Optional[str]
    idempotency_key: Optional[str]
    labels: list[str]
    token: str
    upstream: Optional[dict[str, Any]] = None


@dataclass
class ClaimedJobs:
    SCHEMA: ClassVar[str] = "ClaimedJobs"
    jobs: list[ClaimedJob]


@dataclass
class Lease:
    SCHEMA: ClassVar[str] = "Lease"
    lease_until: str
    cancel_requested: bool


@dataclass
class Claim:
    SCHEMA: ClassVar[str] = "Claim"
    wait: Optional[str] = None
    max: Optional[int] = None
    visibility: Optional[str] = None
    labels: Optional[list[str]] = None
    worker_id: Optional[str] = None


@dataclass
class ProgressRequest:
    SCHEMA: ClassVar[str] = "ProgressRequest"
    percent: float
    message: Optional[str] = None


@dataclass
class Heartbeat:
    SCHEMA: ClassVar[str] = "Heartbeat"
    token: str
    extend: Optional[str] = None
    worker_id: Optional[str] = None
    progress: Optional[ProgressRequest] = None


@dataclass
class Complete:
    SCHEMA: ClassVar[str] = "Complete"
    token: str
    result: Any = None
    worker_id: Optional[str] = None


@dataclass
class Fail:
    SCHEMA: ClassVar[str] = "Fail"
    token: str
    error: Optional[str] = None
    retry_after: Optional[str] = None
    dead: Optional[bool] = None
    worker_id: Optional[str] = None


@dataclass
class Token:
    SCHEMA: ClassVar[str] = "Token"
    token: str
    worker_id: Optional[str] = None


@dataclass
class WorkerRequest:
    SCHEMA: ClassVar[str] = "WorkerRequest"
    host: Optional[str] = None
    labels: Optional[list[str]] = None
    queues: Optional[list[str]] = None
    version: Optional[str] = None
    ttl: Optional[str] = None


# The dataclasses that mirror a schema, for test_models.py.
MODELS = (Backoff, ClaimedJob, ClaimedJobs, Lease, Claim, ProgressRequest, Heartbeat, Complete, Fail, Token, WorkerRequest)


def _encode(body: Any) -> dict[str, Any]:
    """A request body as JSON: fields left as None are left out (the API
    takes a null field as one left out); other values, a result among
    them, go as they are."""
    out = {}
    for f in dataclasses.fields(body):
        v = getattr(body, f.name)
        if v is not None:
            out[f.name] = _encode(v) if dataclasses.is_dataclass(v) else v
    return out


def _decode(cls: Any, data: Any) -> Any:
    """An answer's JSON as cls: fields the dataclass lacks are ignored (the
    API may add some); a missing required one is a TypeError naming it."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        v, t = data[f.name], hints[f.name]
        if dataclasses.is_dataclass(t):
            v = _decode(t, v)
        elif typing.get_origin(t) is list and v is not None:
            (item,) = typing.get_args(t)
            if dataclasses.is_dataclass(item):
                v = [_decode(item, x) for x in v]
        kw[f.name] = v
    return cls(**kw)


# --- The HTTP calls ---------------------------------------------------------


class ApiError(Exception):
    """An error answer: {"error":{"code","message","field"?}}."""

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None):
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field

    @property
    def lost(self) -> bool:
        """Whether it says the job is no longer the caller's: its lease was
        lost, or the job is gone."""
        return self.code == "lease_lost" or self.status == 404

    @property
    def passing(self) -> bool:
        """Whether the same call may pass later: the server, or Redis behind
        it, away for a moment."""
        return self.status >= 500


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(s: str) -> float:
    """Seconds of a Go duration string as the server writes them ("1m30s",
    "250ms", "0s")."""
    if s == "0":
        return 0.0
    seconds, at = 0.0, 0
    while at < len(s):
        m = _DURATION_PART.match(s, at)
        if m is None:
            raise ValueError(f"not a duration: {s!r}")
        seconds += float(m.group(1)) * _UNITS[m.group(2)]
        at = m.end()
    if s == "":
        raise ValueError("not a duration: ''")
    return seconds


class Client:
    """The calls a worker makes. Each raises ApiError for an error answer,
    and OSError (urllib.error.URLError, TimeoutError) when no answer came."""

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(_encode(body)).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as res:
                raw = res.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise ApiError(e.code, err["code"], err["message"], err.get("field")) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(e.code, "http", raw.decode(errors="replace")[:200] or e.reason) from None
        return json.loads(raw) if raw else None

    @staticmethod
    def _job_path(queue: str, job_id: str, action: str) -> str:
        q = urllib.parse.quote(queue, safe="")
        return f"/v1/queues/{q}/jobs/{urllib.parse.quote(job_id, safe='')}/{action}"

    def claim(self, queue: str, req: Claim) -> list[ClaimedJob]:
        """POST /v1/queues/{queue}/claim: the jobs claimed, [] when none came
        within req.wait."""
        wait = parse_duration(req.wait) if req.wait else 0.0
        answer = self._call("POST", f"/v1/queues/{urllib.parse.quote(queue, safe='')}/claim", req, self.timeout + wait)
        return _decode(ClaimedJobs, answer).jobs

    def heartbeat(self, queue: str, job_id: str, req: Heartbeat) -> Lease:
        return _decode(Lease, self._call("POST", self._job_path(queue, job_id, "heartbeat"), req))

    def complete(self, queue: str, job_id: str, req: Complete) -> None:
        self._call("POST", self._job_path(queue, job_id, "complete"), req)

    def fail(self, queue: str, job_id: str, req: Fail) -> None:
        self._call("POST", self._job_path(queue, job_id, "fail"), req)

    def cancel(self, queue: str, job_id: str, req: Token) -> None:
        self._call("POST", self._job_path(queue, job_id, "cancel"), req)

    def put_worker(self, worker_id: str, req: WorkerRequest) -> None:
        self._call("PUT", f"/v1/workers/{urllib.parse.quote(worker_id, safe='')}", req)

    def delete_worker(self, worker_id: str) -> None:
        self._call("DELETE", f"/v1/workers/{urllib.parse.quote(worker_id, safe='')}")


# --- The worker -------------------------------------------------------------


class RetryAfter(Exception):
    """Raised by a handler: retry the job after delay (a Go duration string,
    "250ms", "30s"), whatever its backoff says."""

    def __init__(self, delay: str, message: str):
        super().__init__(message)
        self.delay = delay


class Dead(Exception):
    """Raised by a handler: the job goes to the dead set at once, whatever
    attempts it has left (retrying cannot fix it)."""


class JobContext:
    """What a handler gets beside its job: whether to give up, and a way to
    report progress."""

    def __init__(self) -> None:
        self._aborted = threading.Event()
        self._lock = threading.Lock()
        self._progress: Optional[ProgressRequest] = None
        self.reason: Optional[str] = None
        """Why the handler should give up, once it should: "lease_lost"
        (another worker may be running the job, and nothing this run sends
        counts) or "canceled" (someone asked to cancel the job; it ends
        canceled once the handler returns)."""

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def sleep(self, seconds: float) -> bool:
        """Waits, for at most seconds; False when it ended because the
        handler should give up."""
        return not self._aborted.wait(seconds)

    def progress(self, percent: float, message: Optional[str] = None) -> None:
        """Progress (percent 0 to 100), sent with the next heartbeat."""
        with self._lock:
            self._progress = ProgressRequest(percent, message)

    def _abort(self, reason: str) -> None:
        if not self._aborted.is_set():
            self.reason = reason
            self._aborted.set()

    def _take_progress(self) -> Optional[ProgressRequest]:
        with self._lock:
            p, self._progress = self._progress, None
            return p

    def _give_back(self, p: Optional[ProgressRequest]) -> None:
        with self._lock:
            if self._progress is None:
                self._progress = p


# A handler runs one job; what it returns (any JSON) is the job's result.
# Raising fails the job: it is retried after its backoff, or dead once its
# attempts are spent (RetryAfter and Dead change that).
Handler = Callable[[ClaimedJob, JobContext], Any]

# How long a call that failed for a passing reason (the network, a 503
# while Redis is away) waits before it is tried again: doubling from 100 ms
# to 3.2 s. Complete and fail are tried 6 times: a retried call answers as
# the first did, so sending one twice is harmless.
RETRY_DELAYS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2)


_LOG_LOCK = threading.Lock()  # one event a line, whole, from any thread


def _log_json(event: dict[str, Any]) -> None:
    line = json.dumps({"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **event})
    with _LOG_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Worker:
    """Claims jobs from one queue and runs each in a thread of its own, by
    its kind's handler, heartbeating while it runs.

    handlers: a handler per job kind; a job of another kind fails and is
    retried (another worker may know its kind). concurrency: jobs at once.
    poll_wait: how long a claim waits for a job, 0 to 30s, and so the
    longest a stop waits for the claim under way. labels: the worker's
    labels (it receives jobs that require none, or only labels among
    these). worker_id: its id in the worker registry (GET /v1/workers).
    log: where events go, one dict each (default: a JSON line on stdout).
    """

    def __init__(
        self,
        client: Client,
        queue: str,
        handlers: Mapping[str, Handler],
        *,
        concurrency: int = 4,
        poll_wait: str = "5s",
        labels: Sequence[str] = (),
        worker_id: Optional[str] = None,
        version: str = "worker-py",
        log: Callable[[dict[str, Any]], None] = _log_json,
    ):
        if not 1 <= concurrency <= 1000:
            raise ValueError(f"concurrency must be 1 to 1000, got {concurrency}")
        parse_duration(poll_wait)
        self.client, self.queue, self.handlers = client, queue, dict(handlers)
        self.concurrency, self.poll_wait, self.labels = concurrency, poll_wait, list(labels)
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-py"
        self.version, self.log = version, log
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self._running: set[threading.Thread] = set()

    def stop(self) -> None:
        """Stops claiming; run() returns once the claim under way and the
        running jobs are done. Safe from any thread but the one in run()."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.log({"event": "stopping", "running": len(self._running)})
        with self._cond:
            self._cond.notify_all()

    def run(self) -> None:
        """Claims and runs jobs until stop(); then lets the running jobs
        finish and deregisters. It raises only on a claim the server refuses
        as invalid (a bad queue name or label: the configuration is
        wrong)."""
        self._register()
        self.log({"event": "started", "worker_id": self.worker_id, "queue": self.queue})
        failures = 0
        while True:
            with self._cond:
                while len(self._running) >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait()
                free = self.concurrency - len(self._running)
            if self._stopping.is_set():
                break
            try:
                jobs = self.client.claim(
                    self.queue, Claim(wait=self.poll_wait, max=free, labels=self.labels, worker_id=self.worker_id)
                )
            except ApiError as e:
                # 409 conflict: the registry has no room for this worker now.
                # Any other 4xx (400, 401) is a configuration no retry can fix.
                if not e.passing and e.status != 409:
                    raise
                self._back_off(failures, {"event": "claim_error", "status": e.status, "error": str(e)})
                failures += 1
                continue
            except OSError as e:
                self._back_off(failures, {"event": "claim_error", "error": str(e)})
                failures += 1
                continue
            failures = 0
            for job in jobs:
                t = threading.Thread(target=self._run_job, args=(job,), name=f"job-{job.id}")
                with self._cond:
                    self._running.add(t)
                t.start()
        self.log({"event": "draining", "running": len(self._running)})
        with self._cond:
            while self._running:
                self._cond.wait()
        try:
            self.client.delete_worker(self.worker_id)
        except (ApiError, OSError) as e:
            # It expires at its TTL all the same.
            self.log({"event": "deregister_error", "error": str(e)})
        self.log({"event": "stopped", "worker_id": self.worker_id})

    def _back_off(self, failures: int, event: dict[str, Any]) -> None:
        self.log(event)
        self._stopping.wait(RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)])

    def _register(self) -> None:
        try:
            self.client.put_worker(
                self.worker_id,
                WorkerRequest(host=socket.gethostname(), queues=[self.queue], labels=self.labels, version=self.version),
            )
        except (ApiError, OSError) as e:
            # Its first claim registers it too.
            self.log({"event": "register_error", "error": str(e)})

    def _run_job(self, job: ClaimedJob) -> None:
        try:
            self._work(job)
        finally:
            with self._cond:
                self._running.discard(threading.current_thread())
                self._cond.notify_all()

    def _work(self, job: ClaimedJob) -> None:
        fields = {"job": job.id, "kind": job.kind, "attempt": job.attempts, "fence": job.fence}
        self.log({"event": "claimed", **fields})
        ctx, done = JobContext(), threading.Event()
        beats = threading.Thread(target=self._heartbeats, args=(job, ctx, done, fields), name=f"heartbeat-{job.id}")
        beats.start()
        result: Any = None
        error: Optional[BaseException] = None
        try:
            handler = self.handlers.get(job.kind)
            if handler is None:
                raise LookupError(f"no handler for kind {job.kind!r}")
            result = handler(job, ctx)
        except Exception as e:  # any failure of the handler fails the job
            error = e
        finally:
            done.set()
            beats.join()

        if ctx.reason == "lease_lost":
            self.log({"event": "lease_lost", **fields, "via": "heartbeat"})
            return
        if ctx.reason == "canceled":
            outcome = self._send(lambda: self.client.cancel(job.queue, job.id, Token(job.token, self.worker_id)))
            if outcome is None:
                self.log({"event": "canceled", **fields})
            else:
                self.log({"event": "cancel_error", **fields, "error": str(outcome)})
            return
        if error is None:
            last = ctx._take_progress()
            if last is not None:
                # The last progress, so that the job keeps it: one more heartbeat.
                try:
                    self.client.heartbeat(job.queue, job.id, Heartbeat(job.token, worker_id=self.worker_id, progress=last))
                except (ApiError, OSError) as e:
                    self.log({"event": "heartbeat_error", **fields, "error": str(e)})
            outcome = self._send(lambda: self.client.complete(job.queue, job.id, Complete(job.token, result, self.worker_id)))
            if outcome is None:
                self.log({"event": "completed", **fields})
            elif isinstance(outcome, ApiError) and outcome.lost:
                self.log({"event": "lease_lost", **fields, "via": "complete"})
            else:
                self.log({"event": "complete_error", **fields, "error": str(outcome)})
            return
        fail = Fail(job.token, error=str(error) or type(error).__name__, worker_id=self.worker_id)
        if isinstance(error, RetryAfter):
            fail.retry_after = error.delay
        if isinstance(error, Dead):
            fail.dead = True
        outcome = self._send(lambda: self.client.fail(job.queue, job.id, fail))
        if outcome is None:
            self.log({"event": "failed", **fields, "error": fail.error, **({"dead": True} if fail.dead else {})})
        elif isinstance(outcome, ApiError) and outcome.lost:
            self.log({"event": "lease_lost", **fields, "via": "fail"})
        else:
            self.log({"event": "fail_error", **fields, "error": str(outcome)})

    def _heartbeats(self, job: ClaimedJob, ctx: JobContext, done: threading.Event, fields: dict[str, Any]) -> None:
        """Heartbeats a third of the visibility apart until done, or until
        the lease is lost."""
        every = parse_duration(job.visibility) / 3
        while not done.wait(every):
            sent = ctx._take_progress()
            try:
                lease = self.client.heartbeat(job.queue, job.id, Heartbeat(job.token, worker_id=self.worker_id, progress=sent))
            except ApiError as e:
                if done.is_set():
                    return
                if e.lost:
                    ctx._abort("lease_lost")
                    return
                self.log({"event": "heartbeat_error", **fields, "error": str(e)})
                ctx._give_back(sent)
                continue
            except OSError as e:
                # The lease holds for a while yet: the next beat may pass.
                self.log({"event": "heartbeat_error", **fields, "error": str(e)})
                ctx._give_back(sent)
                continue
            if lease.cancel_requested and not done.is_set():
                # A canceled job keeps its lease until its handler returns.
                ctx._abort("canceled")

    def _send(self, call: Callable[[], None]) -> Optional[Exception]:
        """Sends an outcome (complete, fail, cancel), again while it fails
        for a passing reason: a retried outcome answers as the first one
        did. None when it was taken, else the last error."""
        last: Optional[Exception] = None
        for delay in (0.0, *RETRY_DELAYS):
            if delay:
                time.sleep(delay)
            try:
                call()
                return None
            except ApiError as e:
                last = e
                if not e.passing:
                    return e
            except OSError as e:
                last = e
        return last
