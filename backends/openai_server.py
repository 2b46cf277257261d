"""The worker's OpenAI-compatible HTTP API on top of the async engine."""
from __future__ import annotations

import time
import uuid

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from wire import sse
from webwire.errors import error_middleware, read_json_object
from webwire.internal_key import key_middlewares
from webwire.worker_api import GENERATE, add_routes
from wire.errors import OpenAIError, bad_request
from wire.requests import GenerationParams, parse_chat, parse_completion
from wire.token_ids import check_token_ids

from .engine.core.async_engine import AsyncEngine
from .engine.structured.grammar import GrammarError
from .engine.structured.length_guard import FormatNeedsMoreTokens
from .engine.core.llm_engine import RequestTooLargeError, StepFailedError
from .engine.core.scheduler import QueueFullError
from .engine.core.sequence import INTERACTIVE, PRIORITIES
from .engine.model.models import model_dir
from .serving.cache_salt import take_cache_salt
from .serving.choices import Choice
from .serving.generation_defaults import read_generation_defaults
from .serving.model_identity import model_identity
from wire.model_identity import IDENTITY_HEADER, identity_digest
from .serving.prompting import chat_prompt_ids
from .serving.sampling import engine_sampling, per_choice
from .serving.streams import merged, open_streams
from .serving.timing import RequestTimer
from .serving.trace_phases import record_phases
from .serving.abort_route import answer_abort
from .serving.usage_book import UsageBook
from .serving.tool_grammar import output_grammar, output_shape, uses_tools
from .worker_metrics import WorkerMetrics

MAX_BODY_BYTES = 8 << 20
PRIORITY_HEADER = "x-tiergate-priority"  # set by the gateway from the tenant's policy
DEFAULT_MAX_TOKENS = 1024


def _model_defaults(engine: AsyncEngine) -> dict:
    try:
        return read_generation_defaults(model_dir(engine.core.config.model))
    except KeyError:  # a model handed in directly (tests): no generation config on disk
        return {}


def step_error(exc: StepFailedError) -> OpenAIError:
    """A failed step fails only its own requests: out of device memory is worth a retry (503)."""
    if exc.out_of_memory:
        return OpenAIError(503, f"{exc}; retry, or send a shorter prompt or a lower max_tokens",
                           code="out_of_memory", headers={"Retry-After": "1"})
    return OpenAIError(500, str(exc), code="engine_error")


class WorkerAPI:
    def __init__(self, engine: AsyncEngine, model_name: str, default_max_tokens: int = DEFAULT_MAX_TOKENS,
                 generation_overrides: dict | None = None):
        self.engine = engine
        self.model_name = model_name
        self.default_max_tokens = default_max_tokens
        self.generation_defaults = {**_model_defaults(engine), **(generation_overrides or {})}
        # the ids both the tokenizer and the model's logits know: the bound on ids a request names
        self.vocab_size = min(len(engine.tokenizer), engine.core.model.config.get_text_config().vocab_size)
        self.metrics = WorkerMetrics(engine, model_name)
        self.usage_book = UsageBook()  # what recent requests generated, by the gateway's x-request-id
        self.started = int(time.time())
        self.identity = model_identity(engine.core.config, model_name)  # the gateway's cache keys on it
        self.identity_digest = identity_digest(self.identity)

    def app(self, internal_key: str | None = None) -> web.Application:
        """With `internal_key`, every route but /health answers only a caller that sends it."""
        app = web.Application(middlewares=[error_middleware, *key_middlewares(internal_key)],
                              client_max_size=MAX_BODY_BYTES)
        add_routes(app, self, {GENERATE})
        app.on_response_prepare.append(self._say_identity)
        return app

    async def _say_identity(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer names the model that made it: the gateway keeps only answers of the
        identity its card stated (a worker restarted with other weights is read again)."""
        response.headers[IDENTITY_HEADER] = self.identity_digest

    # -- endpoints ---------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        has_chat = bool(getattr(self.engine.tokenizer, "chat_template", None))
        card = {"id": self.model_name, "object": "model", "created": self.started, "owned_by": "tiergate",
                "capabilities": {"tools": has_chat, "structured_outputs": True, "logprobs": True, "n": True,
                                 "embeddings": False, "max_context_tokens": self.engine.core.max_model_len,
                                 "vocab_size": self.vocab_size},
                "generation_defaults": self.generation_defaults, "identity": self.identity}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "model": self.model_name,
                                  "running": self.engine.num_running(), "waiting": self.engine.num_waiting()})

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def abort(self, request: web.Request) -> web.Response:
        """Stop a request if it still runs and say what it generated: the gateway's way to bill
        a request whose client left before the usage came (a cut stream, a cancelled answer)."""
        return await answer_abort(self.usage_book, request)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        salt = take_cache_salt(body)
        req = parse_chat(body)
        self._check_model(req.model)
        if not getattr(self.engine.tokenizer, "chat_template", None):
            raise bad_request(f"model {self.model_name!r} has no chat template; use /v1/completions",
                              param="model", code="chat_not_supported")
        check_token_ids(req.params, self.vocab_size, where=f"model {self.model_name!r}")
        grammar = self._grammar(output_grammar, req.params)
        return await self._serve(request, chat_prompt_ids(self.engine.tokenizer, req), req.params, True, grammar, salt)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        salt = take_cache_salt(body)
        req = parse_completion(body)
        self._check_model(req.model)
        check_token_ids(req.params, self.vocab_size, req.prompt, where=f"model {self.model_name!r}")
        prompt_ids = req.prompt if isinstance(req.prompt, list) else self.engine.tokenizer.encode(req.prompt)
        if not prompt_ids:
            raise bad_request("the prompt encodes to no tokens", param="prompt")
        return await self._serve(request, prompt_ids, req.params, False, self._grammar(output_grammar, req.params), salt)

    # -- shared generation path -----------------------------------------------------------
    def _check_model(self, model: str) -> None:
        if model != self.model_name:
            raise OpenAIError(404, f"model {model!r} is not served here (this worker serves {self.model_name!r})",
                              param="model", code="model_not_found")

    @staticmethod
    def _grammar(build, params: GenerationParams) -> str | None:
        try:
            return build(params)
        except ValueError as exc:  # llguidance refuses the schema as given
            raise bad_request(f"cannot compile the requested format: {exc}", param=_format_param(params)) from None

    def _max_tokens(self, params: GenerationParams, num_prompt_tokens: int) -> int:
        room = self.engine.core.max_model_len - num_prompt_tokens
        if room <= 0:
            raise bad_request(f"prompt of {num_prompt_tokens} tokens exceeds the context window of "
                              f"{self.engine.core.max_model_len} tokens", param="messages", code="context_length_exceeded")
        default = self.generation_defaults.get("max_tokens", self.default_max_tokens)
        return params.max_tokens or min(default, room)

    async def _serve(self, request: web.Request, prompt_ids: list[int], params: GenerationParams, chat: bool,
                     grammar: str | None, cache_salt: str | None = None):
        priority = request.headers.get(PRIORITY_HEADER, INTERACTIVE)
        if priority not in PRIORITIES:
            raise bad_request(f"header {PRIORITY_HEADER} must be one of {', '.join(PRIORITIES)}",
                              param=PRIORITY_HEADER)
        timer = RequestTimer(self.metrics)
        shape = output_shape(params) if grammar is not None else None
        sampling = engine_sampling(params, self.generation_defaults, self._max_tokens(params, len(prompt_ids)), grammar,
                                   shape, priority, cache_salt)
        opened = []
        tally = self.usage_book.open(request.headers.get("x-request-id"))
        try:
            opened = await open_streams(self.engine, prompt_ids, per_choice(sampling, params.n), params.stop, tally)
            choices = [Choice(i, chat, chat and uses_tools(params), self.engine.tokenizer, params.surface.logprobs)
                       for i in range(params.n)]
            respond = self._stream if params.stream else self._whole
            return await respond(request, opened, choices, params, chat, timer)
        except RequestTooLargeError as exc:
            raise bad_request(str(exc), param="max_tokens", code="context_length_exceeded") from None
        except FormatNeedsMoreTokens as exc:
            raise bad_request(f"{exc}; raise max_tokens to at least {exc.needed}", param="max_tokens",
                              code="max_tokens_too_small") from None
        except GrammarError as exc:
            raise bad_request(str(exc), param=_format_param(params)) from None
        except QueueFullError as exc:
            raise OpenAIError(503, str(exc), code="overloaded", headers={"Retry-After": "1"}) from None
        except StepFailedError as exc:
            raise step_error(exc) from None
        finally:
            if not timer.finished:  # the client went away (or the engine failed) before the end
                self.metrics.requests.labels(self.model_name, "abort").inc()
            record_phases(timer, opened, request, self.model_name, priority)
            try:
                for _, stream in opened:
                    await stream.aclose()  # aborts the sequence and frees its blocks
            finally:
                tally.close()  # the tally ends once the engine stopped every sequence it took

    def _envelope(self, response_id: str, chat: bool, streamed: bool) -> dict:
        kind = ("chat.completion.chunk" if streamed else "chat.completion") if chat else "text_completion"
        return {"id": response_id, "object": kind, "created": int(time.time()), "model": self.model_name}

    @staticmethod
    def _usage(choices: list[Choice]) -> dict:
        first = choices[0].last
        completion = sum(c.num_output_tokens for c in choices)
        return {"prompt_tokens": first.num_prompt_tokens, "completion_tokens": completion,
                "total_tokens": first.num_prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": first.num_cached_tokens}}

    def _record_end(self, timer: RequestTimer, choices: list[Choice]) -> None:
        usage = self._usage(choices)
        timer.record_end(usage["prompt_tokens"], usage["completion_tokens"], choices[0].finish_reason)

    async def _whole(self, request, opened, choices: list[Choice], params, chat: bool, timer):
        async for index, delta in merged(opened):
            timer.token()
            choices[index].add(delta)
        self._record_end(timer, choices)
        body = self._envelope(("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex, chat, False)
        return web.json_response({**body, "choices": [c.whole() for c in choices], "usage": self._usage(choices)})

    async def _stream(self, request, opened, choices: list[Choice], params, chat: bool, timer):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        envelope = self._envelope(("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex, chat, True)
        if chat:
            await response.write(sse.event({**envelope, "choices": [
                {"index": c.index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                 "finish_reason": None} for c in choices]}))
        try:
            async for index, delta in merged(opened):
                timer.token()
                choice = choices[index].chunk(delta)
                if choice is not None:
                    await response.write(sse.event({**envelope, "choices": [choice]}))
        except StepFailedError as exc:  # the status is sent: the stream ends on an error event instead
            error = step_error(exc)
            await response.write(sse.error_event(error.message, error.type, error.code))
            await response.write_eof()
            return response
        self._record_end(timer, choices)
        if params.include_usage:
            await response.write(sse.event({**envelope, "choices": [], "usage": self._usage(choices)}))
        await response.write(sse.DONE)
        await response.write_eof()
        return response


def _format_param(params: GenerationParams) -> str:
    return "tools" if params.tools and params.tool_choice.mode != "none" else "response_format"
