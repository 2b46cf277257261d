"""The worker's OpenAI-compatible HTTP API on top of the async engine."""
from __future__ import annotations

import time
import uuid

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from wire import sse
from wire.errors import OpenAIError, bad_request, error_middleware, read_json_object
from wire.requests import GenerationParams, parse_chat, parse_completion

from .engine.async_engine import AsyncEngine, Delta
from .engine.llm_engine import RequestTooLargeError
from .engine.scheduler import QueueFullError
from .engine.sequence import SamplingParams
from .worker_metrics import WorkerMetrics

MAX_BODY_BYTES = 8 << 20
DEFAULT_MAX_TOKENS = 1024


class WorkerAPI:
    def __init__(self, engine: AsyncEngine, model_name: str, default_max_tokens: int = DEFAULT_MAX_TOKENS):
        self.engine = engine
        self.model_name = model_name
        self.default_max_tokens = default_max_tokens
        self.metrics = WorkerMetrics(engine, model_name)
        self.started = int(time.time())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[error_middleware], client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics_page)
        return app

    # -- endpoints ---------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.model_name, "object": "model", "created": self.started, "owned_by": "tiergate"}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "model": self.model_name,
                                  "running": self.engine.num_running(), "waiting": self.engine.num_waiting()})

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        req = parse_chat(await read_json_object(request))
        self._check_model(req.model)
        tokenizer = self.engine.tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise bad_request(f"model {self.model_name!r} has no chat template; use /v1/completions",
                              param="model", code="chat_not_supported")
        prompt_ids = tokenizer.apply_chat_template(req.messages, add_generation_prompt=True, tokenize=True,
                                                   return_dict=False)
        return await self._serve(request, list(prompt_ids), req.params, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        req = parse_completion(await read_json_object(request))
        self._check_model(req.model)
        prompt_ids = req.prompt if isinstance(req.prompt, list) else self.engine.tokenizer.encode(req.prompt)
        if not prompt_ids:
            raise bad_request("the prompt encodes to no tokens", param="prompt")
        vocab = len(self.engine.tokenizer)
        if any(t >= vocab for t in prompt_ids):
            raise bad_request(f"prompt token ids must be below the vocabulary size {vocab}", param="prompt")
        return await self._serve(request, prompt_ids, req.params, chat=False)

    # -- shared generation path -----------------------------------------------------------
    def _check_model(self, model: str) -> None:
        if model != self.model_name:
            raise OpenAIError(404, f"model {model!r} is not served here (this worker serves {self.model_name!r})",
                              param="model", code="model_not_found")

    def _sampling(self, params: GenerationParams, num_prompt_tokens: int) -> SamplingParams:
        room = self.engine.engine.max_model_len - num_prompt_tokens
        if room <= 0:
            raise bad_request(f"prompt of {num_prompt_tokens} tokens exceeds the context window of "
                              f"{self.engine.engine.max_model_len} tokens", param="messages", code="context_length_exceeded")
        max_tokens = params.max_tokens or min(self.default_max_tokens, room)
        return SamplingParams(max_tokens=max_tokens, temperature=params.temperature, top_p=params.top_p,
                              top_k=params.top_k, seed=params.seed, stop_token_ids=params.stop_token_ids,
                              ignore_eos=params.ignore_eos)

    async def _serve(self, request: web.Request, prompt_ids: list[int], params: GenerationParams, chat: bool):
        timer = _RequestTimer(self.metrics, time.monotonic())
        sampling = self._sampling(params, len(prompt_ids))
        stream = self.engine.generate(prompt_ids, sampling, stop=params.stop)
        try:
            return await self._respond(request, stream, params, chat, timer)
        except RequestTooLargeError as exc:
            raise bad_request(str(exc), param="max_tokens", code="context_length_exceeded") from None
        except QueueFullError as exc:
            raise OpenAIError(503, str(exc), code="overloaded", headers={"Retry-After": "1"}) from None
        finally:
            if not timer.finished:  # the client went away (or the engine failed) before the end
                self.metrics.requests.labels(self.model_name, "abort").inc()
            await stream.aclose()  # aborts the sequence and frees its blocks

    async def _respond(self, request, stream, params: GenerationParams, chat: bool, timer):
        first = await anext(stream)
        response_id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        if params.stream:
            return await self._stream(request, stream, first, response_id, chat, params.include_usage, timer)
        text, last = [], first
        async for delta in _chain(first, stream):
            timer.token()
            text.append(delta.text)
            last = delta
        timer.finish(last)
        choice = {"index": 0, "finish_reason": last.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": "".join(text)}
        else:
            choice.update(text="".join(text), logprobs=None)
        return web.json_response({"id": response_id, "object": "chat.completion" if chat else "text_completion",
                                  "created": int(time.time()), "model": self.model_name,
                                  "choices": [choice], "usage": _usage(last)})

    async def _stream(self, request, stream, first: Delta, response_id: str, chat: bool, include_usage: bool, timer):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"

        def chunk(text: str | None, finish_reason: str | None, role: bool = False) -> bytes:
            if chat:
                delta = {"role": "assistant", "content": ""} if role else ({"content": text} if text else {})
                choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            else:
                choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
            return sse.event({"id": response_id, "object": kind, "created": created, "model": self.model_name,
                              "choices": [choice]})

        if chat:
            await response.write(chunk(None, None, role=True))
        last = first
        async for delta in _chain(first, stream):
            timer.token()
            last = delta
            if delta.text or delta.finished:
                await response.write(chunk(delta.text, delta.finish_reason if delta.finished else None))
        timer.finish(last)
        if include_usage:
            await response.write(sse.event({"id": response_id, "object": kind, "created": created,
                                            "model": self.model_name, "choices": [], "usage": _usage(last)}))
        await response.write(sse.DONE)
        await response.write_eof()
        return response


class _RequestTimer:
    """TTFT / inter-token / end-to-end latency of one request, into the histograms."""

    def __init__(self, metrics: WorkerMetrics, start: float):
        self.metrics, self.start, self.last = metrics, start, None
        self.finished = False

    def token(self) -> None:
        now = time.monotonic()
        if self.last is None:
            self.metrics.ttft.labels(self.metrics.model).observe(now - self.start)
        else:
            self.metrics.itl.labels(self.metrics.model).observe(now - self.last)
        self.last = now

    def finish(self, last: Delta) -> None:
        self.finished = True
        m = self.metrics
        m.e2e.labels(m.model).observe(time.monotonic() - self.start)
        m.prompt_tokens.labels(m.model).inc(last.num_prompt_tokens)
        m.generation_tokens.labels(m.model).inc(last.num_output_tokens)
        m.requests.labels(m.model, last.finish_reason or "unknown").inc()


async def _chain(first: Delta, rest):
    yield first
    if not first.finished:
        async for delta in rest:
            yield delta


def _usage(last: Delta) -> dict:
    return {"prompt_tokens": last.num_prompt_tokens, "completion_tokens": last.num_output_tokens,
            "total_tokens": last.num_prompt_tokens + last.num_output_tokens,
            "prompt_tokens_details": {"cached_tokens": last.num_cached_tokens}}
