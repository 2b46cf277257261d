"""Shutdown steps with a deadline: one step that never ends must not keep the process (or a
test's teardown) waiting forever. A step past its deadline is cancelled without waiting for it
and named in the log; the next step runs."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable

log = logging.getLogger("tiergate.gateway")
STEP_DEADLINE_S = 15.0


async def finish_within(name: str, step: Awaitable, deadline_s: float = STEP_DEADLINE_S) -> bool:
    """True when `step` ended in time (its own failure is logged, not raised)."""
    task = asyncio.ensure_future(step)
    # asyncio.wait, not wait_for: wait_for would wait for the cancellation, which a stuck step may ignore
    done, _ = await asyncio.wait({task}, timeout=deadline_s)
    if not done:
        task.cancel()
        log.warning("shutdown: %s did not finish within %.0f s; going on without it", name, deadline_s)
        return False
    if not task.cancelled() and task.exception() is not None:
        log.warning("shutdown: %s failed: %r", name, task.exception())
    return True
