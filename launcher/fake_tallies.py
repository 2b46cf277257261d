"""What a fake upstream generated for each request, counted like our workers count
(backends/serving/usage_book.py) and answered on their abort endpoint, so benchmarks can set
what upstreams generated against what the gateway billed. The fake paces whole answers too
(one token per chunk delay), so a timeout or a cancellation stops them part way."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Tally:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Tallies:
    def __init__(self):
        self.by_id: dict[str, Tally] = {}
        self.tasks: dict[str, asyncio.Task] = {}

    def open(self, request_id: str | None, prompt_tokens: int) -> Tally:
        tally = Tally(prompt_tokens)
        if request_id:
            self.by_id[request_id] = tally
            self.tasks[request_id] = asyncio.current_task()
        return tally

    def close(self, request_id: str | None, tally: Tally) -> None:
        self.tasks.pop(request_id or "", None)
        tally.done.set()

    @property
    def generated(self) -> int:
        """Prompt and completion tokens of every generation so far."""
        return sum(t.prompt_tokens + t.completion_tokens for t in self.by_id.values())

    async def abort(self, request: web.Request) -> web.Response:
        """POST /v1/internal/requests/{id}/abort: stop it if it runs, then its count (404: unknown)."""
        request_id = request.match_info["id"]
        tally = self.by_id.get(request_id)
        if tally is None:
            return web.json_response({"error": {"message": "no such request", "type": "invalid_request_error",
                                                "param": "request_id", "code": None}}, status=404)
        task = self.tasks.get(request_id)
        if task is not None:
            task.cancel()
        try:
            await asyncio.wait_for(tally.done.wait(), float(request.query.get("wait_s", "2")))
        except asyncio.TimeoutError:
            pass
        return web.json_response({"finished": tally.done.is_set(), "usage": {
            "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens}})
