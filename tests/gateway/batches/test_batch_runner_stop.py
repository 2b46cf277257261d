"""The batch runner stops when asked even if a Redis call swallows the cancellation (a client
that answers a cancelled command instead of raising): the loop must not go round again."""
from __future__ import annotations

import asyncio

from gateway.batches import runner as batch_runner
from gateway.batches.runner import BatchRunner
from gateway.server.shutdown import finish_within
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import services_for
from tests.support.scripted_transport import ScriptedTransport, worker


async def test_stop_ends_the_loop_when_a_redis_call_swallows_the_cancel(monkeypatch, redis_prefix):
    asked = asyncio.Event()

    async def hold_swallowing_the_cancel(self) -> bool:
        asked.set()
        try:
            await asyncio.Event().wait()  # the Redis call is in flight when stop() cancels the loop
        except asyncio.CancelledError:
            return False  # answered instead of raising
        return True

    monkeypatch.setattr(batch_runner.Lease, "hold", hold_swallowing_the_cancel)
    tenants = {"team": {"keys": [{"id": "k", "sha256": hash_key("team-key")}]}}  # tenants: Redis holds batches
    services = services_for(base_config([tier("small", 1, ["http://worker.test"])], redis_prefix, tenants=tenants),
                            ScriptedTransport(worker))
    runner = BatchRunner(lambda: services, lambda services, call, gate: None)
    runner.start()
    assert runner.loop is not None  # Redis and batches are configured: the loop runs
    await asyncio.wait_for(asked.wait(), 10)
    assert await finish_within("the batch runner", runner.stop(), deadline_s=10)
    assert runner.loop.cancelled()
