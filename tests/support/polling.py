"""Wait on state by polling with a deadline, never a fixed sleep."""
from __future__ import annotations

import asyncio
import inspect
import time


async def wait_for(predicate, timeout_s: float = 30.0, interval_s: float = 0.05):
    """Poll a predicate (plain or async) until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s (last value {value!r})")
        await asyncio.sleep(interval_s)


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.05):
    """The same for code without an event loop: poll a plain predicate until it is truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s (last value {value!r})")
        time.sleep(interval_s)
