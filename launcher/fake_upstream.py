"""A fake OpenAI-compatible upstream, for gateway tests and the gateway benchmark.

It serves the worker's API (webwire/worker_api.py: chat and text completions, whole or
SSE-streamed with usage, embeddings, /v1/models, /health, /metrics, and the abort route that says
what a request generated), instantly and deterministically, with the worker's checks and answer
shapes (tests/backends/test_worker_api_shapes.py), and can be told to misbehave:
answer 5xx, be unhealthy, hang, answer as a worker whose queue is full, or cut a stream after
some chunks.
Run alone: `python -m launcher.fake_upstream --port 9001 [--chunks 8]`; with TIERGATE_WORKER_KEY set,
generations without that key get 401, as our workers answer.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import deque

from aiohttp import web

from wire.model_identity import IDENTITY_HEADER, NUMERIC_SETTINGS, identity_digest

from backends.serving.abort_route import answer_abort
from backends.serving.usage_book import UsageBook
from webwire.errors import error_middleware, read_json_object
from webwire.internal_key import key_from_env
from webwire.worker_api import EMBED, GENERATE, add_routes
from backends.serving.cache_salt import take_cache_salt
from wire.requests import parse_chat, parse_completion

_DONE = b"data: [DONE]\n\n"
# what a fake states it can do unless told otherwise: everything a gateway may ask of a worker
STATED = {"tools": True, "structured_outputs": True, "logprobs": True, "n": True, "embeddings": False,
          "max_context_tokens": 1 << 20, "vocab_size": 1 << 20}
SETTINGS = {**dict.fromkeys(NUMERIC_SETTINGS), "device": "cpu", "kv_cache_dtype": "auto", "quant_group_size": 32}


class FakeUpstream:
    def __init__(self, name: str = "fake", chunks: int = 4, chunk_delay_s: float = 0.0):
        self.name = name
        self.chunks = chunks  # completion tokens per answer (one per streamed chunk)
        self.chunk_delay_s = chunk_delay_s
        self.delay_s = 0.0  # before answering
        self.fail_status: int | None = None  # answer every generation with this status
        self.overloaded = False  # answer generations as a worker with a full queue: 503 "overloaded", Retry-After
        self.reply: str | None = None  # chat answers say this and end on their own (finish_reason stop)
        self.replies: dict[str, str] = {}  # like `reply`, for chat requests whose body holds the key
        self.poison: str | None = None  # a generation whose body holds this text gets a 500 (a worker bug)
        self.healthy = True
        self.health_delay_s = 0.0  # before answering /health (a worker too busy to answer it in time)
        self.hang = False  # accept, then never answer
        self.cut_after: int | None = None  # streamed: drop the connection after this many chunks
        self.reports_usage = True  # False: like an upstream that never says its usage, whole or streamed
        self.served = 0
        self.in_flight = 0
        self.disconnects = 0  # generations abandoned because the client went away
        self.seen: deque[dict] = deque(maxlen=256)  # recent request bodies and headers
        self.health_headers: deque[dict] = deque(maxlen=64)  # headers of recent GET /health calls
        self.api_key: str | None = None  # like `vllm serve --api-key`: generations without it get 401
        # stated in its /v1/models card, as our own workers do; None: a foreign upstream's card, stating nothing
        self.capabilities: dict | None = dict(STATED)
        # the model identity its card states (our workers: name, settings, weights digest)
        self.identity: dict | str = {"model": name, "settings": SETTINGS,
                                     "weights_sha256": hashlib.sha256(name.encode()).hexdigest()}
        self.count_prompt = None  # body -> prompt tokens (a real tokenizer's count); None: a quarter of its JSON
        self.count_choices = False  # usage counts every one of the `n` choices (as OpenAI bills), not one
        self.usage_book = UsageBook()  # what each generation counted, by x-request-id: the abort route's answers
        self.abortable = False  # True: answers the abort route as our workers do (else 404, as a foreign upstream)
        self.paced = False  # True: whole answers take a chunk delay per token too, so a timeout stops them part way
        self.logprob = -0.01  # each generated token's logprob, for requests that ask for logprobs (the cascade's)
        self.generated = 0  # prompt and completion tokens of every generation that ended
        self.started = int(time.time())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[error_middleware])
        add_routes(app, self, {GENERATE, EMBED})
        app.on_response_prepare.append(self._say_identity)
        return app

    async def abort(self, request):
        if not self.abortable:  # like a foreign upstream: no such endpoint
            raise web.HTTPNotFound()
        return await answer_abort(self.usage_book, request)

    async def metrics_page(self, request):
        """The gauges a worker's page has that the console reads, in Prometheus' text format."""
        lines = [f"tiergate_worker_num_requests_running {self.in_flight}",
                 "tiergate_worker_num_requests_waiting 0", f"tiergate_worker_requests_total {self.served}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def health(self, request):
        self.health_headers.append({k.lower(): v for k, v in request.headers.items()})
        if self.health_delay_s:
            await asyncio.sleep(self.health_delay_s)
        return web.json_response({"status": "ok" if self.healthy else "down", "model": self.name,
                                  "running": self.in_flight, "waiting": 0}, status=200 if self.healthy else 503)

    async def _say_identity(self, request, response):
        """Like our workers: every answer names the model identity its card states."""
        if self.identity is not None:
            response.headers[IDENTITY_HEADER] = identity_digest(self.identity)

    async def models(self, request):
        """A card like our worker's (what it can do, which model it is), or a foreign upstream's."""
        card = {"id": self.name, "object": "model"}
        if self.capabilities is not None:
            card.update({"created": self.started, "owned_by": "tiergate", "capabilities": self.capabilities,
                         "generation_defaults": {}, "identity": self.identity})
        return web.json_response({"object": "list", "data": [card]})

    def _failing(self) -> web.Response:
        return web.json_response({"error": {"message": f"{self.name} failing on purpose", "type": "server_error",
                                            "param": None, "code": None}}, status=self.fail_status)

    async def embeddings(self, request):
        """Fixed 8-float vectors, one per input; a token per 4 characters of usage."""
        body = await request.json()
        if self.fail_status:
            return self._failing()
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        self.served += 1
        tokens = sum(len(x) // 4 + 1 if isinstance(x, str) else len(x) for x in inputs)
        return web.json_response({"object": "list", "model": body.get("model"), "usage": {
            "prompt_tokens": tokens, "total_tokens": tokens}, "data": [
            {"object": "embedding", "index": i, "embedding": [0.125] * 8} for i in range(len(inputs))]})

    async def chat(self, request):
        return await self._generate(request, chat=True)

    async def completions(self, request):
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool):
        body = await read_json_object(request)
        checked = dict(body)
        take_cache_salt(checked)  # the gateway's field, as the worker takes it
        (parse_chat if chat else parse_completion)(checked)  # the worker's own checks: the same 400s
        self.seen.append({"body": body, "headers": {k.lower(): v for k, v in request.headers.items()}})
        self.in_flight += 1
        tally = self.usage_book.open(request.headers.get("x-request-id"))
        tally.began()
        counted = [0, 0]  # prompt and completion tokens so far, as the abort route reports them
        try:
            return await self._answer(request, body, chat, counted)
        except (asyncio.CancelledError, ConnectionError):
            self.disconnects += 1
            raise
        finally:
            self.in_flight -= 1
            self.generated += sum(counted)
            tally.ended(*counted)
            tally.close()

    async def _answer(self, request, body, chat, counted):
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        if self.hang:
            await asyncio.sleep(3600)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.overloaded:
            return web.json_response({"error": {"message": f"{self.name}: the queue is full", "type": "server_error",
                                                "param": None, "code": "overloaded"}},
                                     status=503, headers={"Retry-After": "1"})
        if self.fail_status:
            return self._failing()
        if self.poison and self.poison in json.dumps(body):
            return web.json_response({"error": {"message": f"{self.name} tripped on the request", "type": "server_error",
                                                "param": None, "code": None}}, status=500)
        if body.get("model") == "reject-me":
            return web.json_response({"error": {"message": "model rejected upstream", "type": "invalid_request_error",
                                                "param": "model", "code": "model_not_found"}}, status=404)
        self.served += 1
        text = json.dumps(body.get("messages") or body.get("prompt"))
        prompt_tokens = self.count_prompt(body) if self.count_prompt is not None else len(text) // 4 + 1
        n = min(self.chunks, body.get("max_tokens") or self.chunks)
        billed = n * (body.get("n") or 1) if self.count_choices else n
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": billed, "total_tokens": prompt_tokens + billed,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        counted[0] = prompt_tokens
        base = {"id": f"cmpl-{self.name}-{self.served}", "created": int(time.time()), "model": body.get("model")}
        if body.get("stream"):
            return await self._stream(request, body, chat, base, n, usage, counted)
        for _ in range(n if self.paced else 0):  # one token per chunk delay, as a worker generates them
            await asyncio.sleep(self.chunk_delay_s)
            counted[1] += 1
        counted[1] = billed
        return self._whole(body, chat, base, n, usage, text)

    def _logprobs(self, body, chat, tokens: list[str]) -> dict | None:
        """The chosen tokens' logprobs when the request asks for them (chat: true; completions: a count)."""
        asked = body.get("logprobs")
        if asked is None or asked is False:
            return None
        if chat:
            return {"content": [{"token": t, "logprob": self.logprob, "bytes": None, "top_logprobs": []} for t in tokens]}
        return {"tokens": tokens, "token_logprobs": [self.logprob] * len(tokens), "top_logprobs": None,
                "text_offset": [0] * len(tokens)}

    def _whole(self, body, chat, base, n, usage, text):
        words = " ".join(f"w{i}" for i in range(n))
        reply = next((said for key, said in self.replies.items() if key in text), self.reply)
        logprobs = self._logprobs(body, chat, [f"w{i}" for i in range(n)])
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": words}, "logprobs": logprobs,
                      "finish_reason": "length"} if reply is None else \
                {"index": 0, "message": {"role": "assistant", "content": reply}, "logprobs": logprobs,
                 "finish_reason": "stop"}
            obj = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        else:
            obj = {**base, "object": "text_completion",
                   "choices": [{"index": 0, "text": words, "logprobs": logprobs, "finish_reason": "length"}],
                   "usage": usage}
        if not self.reports_usage:
            del obj["usage"]
        return web.json_response(obj, headers={"x-fake-upstream": self.name})

    async def _stream(self, request, body, chat, base, n, usage, counted):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "x-fake-upstream": self.name})
        await response.prepare(request)
        kind = "chat.completion.chunk" if chat else "text_completion"
        for i in range(n):
            if self.cut_after is not None and i == self.cut_after:
                request.transport.close()  # a worker dying mid-stream
                return response
            delta = {"role": "assistant", "content": f"w{i} "} if i == 0 else {"content": f"w{i} "}
            logprobs = self._logprobs(body, chat, [f"w{i} "])
            choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": None} if chat else \
                {"index": 0, "text": f"w{i} ", "logprobs": logprobs, "finish_reason": None}
            await response.write(_event({**base, "object": kind, "choices": [choice]}))
            counted[1] = i + 1
            if self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
        if (body.get("stream_options") or {}).get("include_usage") and self.reports_usage:
            await response.write(_event({**base, "object": kind, "choices": [], "usage": usage}))
        await response.write(_DONE)
        await response.write_eof()
        return response


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


async def start_fake(host: str = "127.0.0.1", port: int = 0, **kwargs) -> tuple[FakeUpstream, web.AppRunner, str]:
    """Start a FakeUpstream in this event loop; returns it, its runner (to clean up) and its URL."""
    fake = FakeUpstream(**kwargs)
    runner = web.AppRunner(fake.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return fake, runner, f"http://{host}:{bound}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    args = parser.parse_args()
    loop = None
    try:
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:
        pass
    fake = FakeUpstream(chunks=args.chunks, chunk_delay_s=args.chunk_delay)
    fake.delay_s = args.delay
    fake.api_key = key_from_env()  # the key a gateway sends as the tier's api_key_env, as a worker takes it
    web.run_app(fake.app(), host=args.host, port=args.port,
                access_log=None, print=None, handler_cancellation=True, loop=loop)


if __name__ == "__main__":
    main()
