"""Slow clients cannot hold the gateway's connections: a connection whose first request's
headers have not all arrived within `limits.header_read_timeout_s` is closed, an idle
keep-alive connection after `limits.keepalive_timeout_s`, and a body that has not all arrived
within `limits.body_read_timeout_s` of the handler's first read is a 408 (core/body.py).

aiohttp has no header deadline of its own (its keep-alive timer is the only one, an hour by
default), so the runner's connections get one here, through the same class swap errors.py uses.
"""
from __future__ import annotations

import logging

from .errors import JsonErrorHandler

log = logging.getLogger("gateway.http")


class HeaderDeadlineHandler(JsonErrorHandler):
    """Closes a connection whose first request's headers are late; the timer lives in the server
    (the handler's slots are aiohttp's)."""

    __slots__ = ()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        server = self._manager
        timeout_s = getattr(server, "header_timeout_s", 0)
        if timeout_s:
            server.header_timers[self] = self._loop.call_later(timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        if self._manager is not None:
            self._manager.header_timers.pop(self, None)
        # a first request whose headers arrived was counted (aiohttp counts parsed requests): the
        # timer is left to run out rather than stopped on each request, a call less per request
        if self._request_count == 0 and not self._messages and not self._request_in_progress:
            log.info("closed a connection whose request headers did not arrive in time")
            self.force_close()

    def _stop_header_timer(self) -> None:
        timer = self._manager.header_timers.pop(self, None) if self._manager is not None else None
        if timer is not None:
            timer.cancel()

    def connection_lost(self, exc) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)
