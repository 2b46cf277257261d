"""PolicyStore against the shared Redis: an admission whose reply is lost is run again by
redis-py (it resends a command after a dropped connection) and must neither be charged twice nor
be refused by its own first run. A proxy in front of Redis drops the connection once, right after
Redis answered the first admission script, so the first run counted and its reply never arrived."""
from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlparse

import redis.asyncio as aioredis

from policies.periods import Periods
from policies.store import Reservation
from tests.support import SHARED_REDIS

PERIODS = Periods("2026-11-28", "2026-11-23", "2026-11")


class ReplyDropper:
    """Forwards each client connection to Redis, both ways at once; the first reply to an EVALSHA
    that is not a NOSCRIPT error is swallowed and that client's connection closed."""

    def __init__(self):
        self.dropped = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._server.close()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        target = urlparse(SHARED_REDIS)
        redis_in, redis_out = await asyncio.open_connection(target.hostname, target.port or 6379)
        script_sent = asyncio.Event()  # redis-py waits for each answer, so the next bytes answer it

        async def upstream() -> None:
            while data := await client_in.read(65536):
                if b"EVALSHA" in data.upper():
                    script_sent.set()
                redis_out.write(data)
                await redis_out.drain()

        async def downstream() -> None:
            while reply := await redis_in.read(65536):
                if script_sent.is_set() and self.dropped == 0 and not reply.startswith(b"-NOSCRIPT"):
                    self.dropped += 1
                    return  # the script ran in Redis; its answer is lost with the connection
                script_sent.clear()
                client_out.write(reply)
                await client_out.drain()

        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_out, redis_out):
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()


async def test_an_admission_run_again_after_its_reply_was_lost_is_admitted_and_charged_once(make_service):
    dropper = ReplyDropper()
    port = await dropper.start()
    through_proxy = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    service = make_service({"acme": {"keys": ["sk-acme"], "rate_limits": {"requests_per_minute": 1,
                                                                        "tokens_per_minute": 1000},
                                     "budgets": {"daily_usd": {"hard": 1.0}}}}, redis=through_proxy)
    tenant = service.authenticate("Bearer sk-acme")
    store, keys = service.store, service.store.keys
    try:
        first = await store.admit(tenant, "req-1:1:1", 300, PERIODS, Reservation("req-1", 5000, 60_000))
        assert dropper.dropped == 1  # redis-py ran the script a second time, on a new connection
        assert first.status == 0  # admitted: the second run found the first one's mark
        assert await store.redis.zcard(keys.requests_window("acme")) == 1
        bucket = await store.redis.hget(keys.token_bucket("acme"), "tokens")
        assert float(bucket) == 700  # the tokens charged once
        assert int(await store.redis.hget(keys.reserved_amounts("acme"), "#total")) == 5000
        # the mark lasts as long as the call may be resent (its 5 s deadline) and a margin, not longer
        assert 0 < await store.redis.pttl(keys.admitted("acme", "req-1:1:1")) <= 15_000
        again = await store.admit(tenant, "req-2:1:2", 300, PERIODS, Reservation("req-2", 5000, 60_000))
        assert again.status == 1  # another request: the one-a-minute limit holds
    finally:
        await through_proxy.aclose()
        await dropper.close()
