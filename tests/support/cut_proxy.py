"""A TCP proxy in front of the shared Redis that a test can cut and restore: `cut()` closes every
connection through it and stops listening (a replica's Redis goes away as in a partition),
`restore()` listens again on the same port. It runs on its own thread's event loop, so it
outlives any one test's loop (a module's gateways are started once)."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from urllib.parse import urlparse

from launcher.processes import SHARED_REDIS


class CutProxy:
    def __init__(self, target: str = SHARED_REDIS):
        parsed = urlparse(target)
        self._target = (parsed.hostname, parsed.port or 6379)
        self._server: asyncio.AbstractServer | None = None
        self._pumps: set[asyncio.Task] = set()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cut-proxy", daemon=True)
        self._thread.start()

    def _run(self, coroutine) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    def restore(self) -> None:
        self._run(self._listen())

    def cut(self) -> None:
        self._run(self._cut())

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        self._server.close()
        await self._server.wait_closed()
        for pump in list(self._pumps):
            pump.cancel()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        redis_in, redis_out = await asyncio.open_connection(*self._target)

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

        pumps = {asyncio.ensure_future(pump(client_in, redis_out)), asyncio.ensure_future(pump(redis_in, client_out))}
        self._pumps |= pumps
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        finally:
            self._pumps -= pumps
            for task in pumps:
                task.cancel()
            for writer in (client_out, redis_out):
                writer.close()
                with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                    await writer.wait_closed()
