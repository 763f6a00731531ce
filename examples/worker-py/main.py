"""The example worker: four job kinds that show what a handler can do, run
by Worker (chronoq_worker.py) on one queue until SIGTERM or SIGINT.
Configured by the environment:

    CHRONOQ_URL          the server (default http://127.0.0.1:8080)
    CHRONOQ_TOKEN        its bearer token, when it has one
    CHRONOQ_QUEUE        the queue to work (default "default")
    CHRONOQ_CONCURRENCY  jobs at once (default 4)
    CHRONOQ_POLL_WAIT    a claim's long poll, 0 to 30s (default 5s)
    CHRONOQ_WORKER_ID    its id in the worker registry (default <host>-<pid>-py)
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
from typing import Any

from chronoq_worker import ClaimedJob, Client, Dead, JobContext, RetryAfter, Worker


def fields(payload: Any) -> dict[str, Any]:
    """The payload as an object, whatever JSON it is."""
    return payload if isinstance(payload, dict) else {}


def greet(job: ClaimedJob, ctx: JobContext) -> Any:
    """A result: {"name":"Ada"} completes with {"greeting":"Hello, Ada!"}."""
    name = fields(job.payload).get("name")
    if not isinstance(name, str):
        raise Dead("payload.name must be a string")
    return {"greeting": f"Hello, {name}!"}


def flaky(job: ClaimedJob, ctx: JobContext) -> Any:
    """Failing, then succeeding: {"fail_times":1} fails its first attempt
    (retried after the job's backoff), {"fail_times":1,"retry_after":"200ms"}
    asks for its retry 200 ms later instead."""
    p = fields(job.payload)
    fail_times, retry_after = p.get("fail_times", 1), p.get("retry_after")
    if not isinstance(fail_times, int):
        raise Dead("payload.fail_times must be a number")
    if job.attempts <= fail_times:
        message = f"attempt {job.attempts} of {fail_times + 1} fails on purpose"
        raise RetryAfter(retry_after, message) if isinstance(retry_after, str) else RuntimeError(message)
    return {"attempts": job.attempts}


def slow(job: ClaimedJob, ctx: JobContext) -> Any:
    """A long job: {"seconds":5} runs 5 s, past its visibility if need be (the
    worker heartbeats meanwhile), reporting its progress each second, and
    gives up when its lease is lost or the job is canceled."""
    seconds = fields(job.payload).get("seconds", 1)
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise Dead("payload.seconds must be a number >= 0")
    steps = math.ceil(seconds)
    for done in range(steps):
        if not ctx.sleep(min(1, seconds - done)):
            raise InterruptedError(f"gave up: {ctx.reason}")
        ctx.progress(round(100 * (done + 1) / steps), f"second {done + 1} of {steps}")
    return {"slept": seconds}


def poison(job: ClaimedJob, ctx: JobContext) -> Any:
    """A job no retry can fix: to the dead set at once."""
    raise Dead("poison: this job can never succeed")


def positive_int(name: str, default: int) -> int:
    v = os.environ.get(name, "")
    if v == "":
        return default
    if not v.isdigit() or int(v) < 1:
        sys.exit(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def main() -> None:
    worker = Worker(
        Client(os.environ.get("CHRONOQ_URL") or "http://127.0.0.1:8080", os.environ.get("CHRONOQ_TOKEN") or None),
        os.environ.get("CHRONOQ_QUEUE") or "default",
        {"greet": greet, "flaky": flaky, "slow": slow, "poison": poison},
        concurrency=positive_int("CHRONOQ_CONCURRENCY", 4),
        poll_wait=os.environ.get("CHRONOQ_POLL_WAIT") or "5s",
        worker_id=os.environ.get("CHRONOQ_WORKER_ID") or None,
    )

    # A graceful stop: no more claims, the running jobs finish. A second
    # signal ends the process at once (their leases lapse, and the
    # reclaimer gives their jobs to another worker).
    def on_signal(signum: int, _frame: Any) -> None:
        signal.signal(signum, lambda *_: os._exit(130))
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # The worker runs in a thread of its own: the main thread is where
    # Python runs signal handlers, so it only waits. The other threads
    # block the signals (a thread inherits its creator's mask): a signal
    # the kernel gave one of them would leave the main thread asleep in
    # join(), its handler never run.
    failure: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as e:  # handed to the main thread, which exits with it
            failure.append(e)

    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    t = threading.Thread(target=run, name="worker")
    t.start()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    t.join()
    if failure:
        raise failure[0]


if __name__ == "__main__":
    main()
