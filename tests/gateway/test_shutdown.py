"""A shutdown step that never ends is cut at its deadline, named in the log, and the next runs."""
from __future__ import annotations

import asyncio
import logging

from gateway.server.shutdown import finish_within


async def test_a_stuck_step_is_cut_at_its_deadline_and_named(caplog):
    async def ignores_cancellation():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:  # holds on past its cancellation: a plain wait_for would wait
            await asyncio.sleep(10)

    loop = asyncio.get_running_loop()
    began = loop.time()
    with caplog.at_level(logging.WARNING, logger="tiergate.gateway"):
        assert await finish_within("the stuck step", ignores_cancellation(), deadline_s=0.2) is False
    assert loop.time() - began < 5 and "the stuck step did not finish" in caplog.text


async def test_a_step_that_ends_or_fails_in_time_does_not_stop_the_next(caplog):
    async def fails():
        raise RuntimeError("redis gone")

    with caplog.at_level(logging.WARNING, logger="tiergate.gateway"):
        assert await finish_within("a failing step", fails(), deadline_s=5) is True
        assert await finish_within("a quick step", asyncio.sleep(0), deadline_s=5) is True
    assert "a failing step failed" in caplog.text and "quick step" not in caplog.text
