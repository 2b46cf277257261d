"""Wait on state by polling with a deadline, never a fixed sleep."""
from __future__ import annotations

import asyncio
import inspect
import time


class Pending:
    """A falsy answer that says why it is not done yet: the timeout message shows `detail`."""

    def __init__(self, detail):
        self.detail = detail

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return repr(self.detail)


def _timed_out(what: str, timeout_s: float, value) -> AssertionError:
    return AssertionError(f"{what} not met within {timeout_s}s (last value {value!r})")


async def wait_for(predicate, timeout_s: float = 30.0, interval_s: float = 0.05, what: str = "condition"):
    """Poll a predicate (plain or async) until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        await asyncio.sleep(interval_s)


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.05, what: str = "condition"):
    """The same for code without an event loop: poll a plain predicate until it is truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        time.sleep(interval_s)
