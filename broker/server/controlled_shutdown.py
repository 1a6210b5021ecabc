"""``ControlledShutdown``: leaving the cluster before stopping, bounded as Kafka bounds it.

Kafka's controlled shutdown asks the controller to move leadership away from the stopping
broker, so that clients switch leaders before its logs close; it gives up after
``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms`` apart,
and the broker stops anyway ("Proceeding to do an unclean shutdown"). In Sluice leaving the
cluster is the cluster view's ``stop`` — the controller resigns, the broker deregisters, the
controller moves its leaderships — and it needs ZooKeeper. So:

* an attempt waits (at most the backoff) for ZooKeeper to be connected and starts leaving,
  then waits for the leave to finish until the backoff since the attempt began has passed;
* an attempt fails while ZooKeeper is not connected or while the leave is unfinished (one
  started leave is awaited by every later attempt: it is never started twice);
* at most ``max_retries`` attempts: the whole takes at most ``max_retries x backoff``
  (:attr:`ControlledShutdown.budget_s`). Each failed attempt logs one line, and so does
  giving up.

Calls that may block on ZooKeeper run on daemon threads of their own
(:func:`start_thread`, :func:`run_on_thread`), never in the loop's default executor: its
threads may all be stuck in ZooKeeper calls, and an unfinished executor thread holds the
interpreter's exit. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# How often an attempt looks at the ZooKeeper connection while it waits for one (seconds).
CONNECTED_POLL_S = 0.1


def start_thread(name: str, call: Callable[[], object]) -> asyncio.Future[None]:
    """Run ``call`` on a daemon thread named ``name``; the future of its end (its result
    None, or the exception it raised), on the running loop."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            call()
        except BaseException as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return asyncio.wrap_future(done)


async def run_on_thread(name: str, call: Callable[[], object], timeout: float) -> bool:
    """:func:`start_thread` and wait up to ``timeout`` seconds: whether ``call`` ended in
    time (an exception it raised is logged in one line, not raised). A thread that did not
    end is left running: it is a daemon."""
    ended = start_thread(name, call)
    done, _ = await asyncio.wait({ended}, timeout=timeout)
    if not done:
        return False
    if (exc := ended.exception()) is not None:
        log.warning("%s failed: %r", name, exc)
    return True


@dataclass(frozen=True)
class ControlledShutdown:
    """Kafka's ``controlled.shutdown.*`` settings and the attempts they allow; see the module
    docstring."""

    enabled: bool = True
    max_retries: int = 3
    retry_backoff_ms: int = 5_000

    @property
    def budget_s(self) -> float:
        """The longest :meth:`leave` takes (seconds)."""
        return self.max_retries * self.retry_backoff_ms / 1000 if self.enabled else 0.0

    async def leave(
        self,
        connected: Callable[[], bool],
        leave: Callable[[], object],
        on_attempt: Callable[[int], None] = lambda _attempt: None,
    ) -> bool:
        """Run ``leave`` (blocking; on a thread) once ``connected()`` holds, within the
        attempts; ``on_attempt(n)`` as attempt ``n`` starts. Whether ``leave`` ended (an
        exception it raised is logged; it counts as ended: nothing is left to wait for)."""
        if not self.enabled or self.max_retries <= 0:
            log.info("controlled shutdown disabled: stopping without leaving the cluster first")
            return False
        backoff = self.retry_backoff_ms / 1000
        leaving: asyncio.Future[None] | None = None
        reason = ""
        for attempt in range(1, self.max_retries + 1):
            on_attempt(attempt)
            deadline = time.monotonic() + backoff
            while leaving is None and time.monotonic() < deadline:
                if connected():
                    leaving = start_thread("controlled-shutdown", leave)
                else:
                    await asyncio.sleep(min(CONNECTED_POLL_S, backoff))
            if leaving is None:
                reason = "not connected to ZooKeeper"
            else:
                done, _ = await asyncio.wait(
                    {leaving}, timeout=max(0.0, deadline - time.monotonic())
                )
                if done:
                    if (exc := leaving.exception()) is not None:
                        log.warning("leaving the cluster failed: %r", exc)
                    else:
                        log.info("controlled shutdown succeeded (attempt %d)", attempt)
                    return True
                reason = f"leaving the cluster took longer than {self.retry_backoff_ms} ms"
            if attempt < self.max_retries:
                log.warning(
                    "controlled shutdown attempt %d of %d failed: %s; retrying",
                    attempt, self.max_retries, reason,
                )  # fmt: skip
        log.warning(
            "controlled shutdown failed after %d attempts (%s): stopping anyway; the "
            "partitions this broker leads move when its ZooKeeper session expires",
            self.max_retries, reason,
        )  # fmt: skip
        return False
