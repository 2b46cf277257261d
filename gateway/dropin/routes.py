"""/v1/responses (OpenAI Responses API) and /v1/messages (Anthropic Messages) on the chat path.

Each handler translates the request into a chat-completions body (wire/), then runs the one
request path in handlers.generate (auth, classifier routing, policies, admission, relay,
accounting, settle) with a shaper that turns the chat answer, whole or streamed chunk by
chunk, back into its own wire format. Nothing here routes, bills or relays by itself.
"""
from __future__ import annotations

import json

from aiohttp import web

from wire.anthropic_output import MessagesStream, completion_to_message, error_body
from wire.anthropic_request import messages_to_chat
from wire.errors import OpenAIError
from wire.responses_output import ResponsesStream, assistant_message, completion_to_response, new_id
from wire.responses_request import responses_to_chat
from wire.sse import named_event

from . import response_store
from ..core.authenticated import authenticated
from ..api.handlers import count_refusal, generate
from ..core.body import read_authenticated
from ..core.services import SERVICES


def _frames(events) -> bytes:
    return b"".join(named_event(name, payload) for name, payload in events)


def _answer(response: web.Response) -> dict | None:
    """The chat completion inside a whole 200 answer; None for an error answer (passed on)."""
    return json.loads(response.body) if response.status == 200 else None


class ResponsesShaper:
    def __init__(self, body: dict, translation, save):
        self.body, self.translation, self.save = body, translation, save
        self.response_id = new_id("resp")
        self.stored = False
        self.stream = ResponsesStream(body, self.response_id, body["model"])  # model: checked by the translation

    async def _store(self, response: dict) -> None:
        if self.translation.store:
            self.stored = await self.save(self.response_id,
                                          [*self.translation.conversation, assistant_message(response)])

    async def whole(self, answer: web.Response) -> web.Response:
        completion = _answer(answer)
        if completion is None:
            return answer
        response = completion_to_response(completion, self.body, self.response_id, self.body["model"])
        await self._store(response)
        return web.json_response(response)

    def chunk(self, obj: dict) -> bytes:
        return _frames(self.stream.feed(obj))

    async def end(self) -> bytes:
        events = self.stream.end()
        await self._store(self.stream.response())  # stored before the client sees response.completed
        return _frames(events)

    def error(self, message: str) -> bytes:
        return _frames([self.stream.failed(message)])


async def responses(request: web.Request) -> web.StreamResponse:
    services = request[SERVICES]
    config = services.config
    tenant, body = await read_authenticated(request, config.limits.max_body_bytes,
                                            lambda: authenticated(request, services.sinks.policy, bearer_only=True))
    previous = body.get("previous_response_id")
    try:
        history = (await response_store.load_history(services.redis, config, tenant.name, previous)
                   if isinstance(previous, str) and previous else None)
        translation = responses_to_chat(body, history)
    except OpenAIError as refusal:
        await count_refusal(services.sinks.policy, request, tenant, refusal)
        raise
    if services.redis is None and translation.store:  # nowhere to keep it: say so in the answer's `store`
        body, translation.store = {**body, "store": False}, False

    async def save(response_id: str, messages: list[dict]) -> bool:
        return await response_store.save(services.redis, config, tenant, response_id, messages)

    shaper = ResponsesShaper(body, translation, save)
    if translation.store:
        try:
            await response_store.reserve(services.redis, config, tenant, shaper.response_id,
                                         translation.conversation)
        except OpenAIError as refusal:
            await count_refusal(services.sinks.policy, request, tenant, refusal)
            raise
    try:
        return await generate(request, "chat", body=translation.chat, tenant=tenant, shaper=shaper)
    finally:
        if translation.store and not shaper.stored:
            await response_store.release(services.redis, config, tenant.name, shaper.response_id)


class MessagesShaper:
    def __init__(self, model: str):
        self.model = model
        self.stream = MessagesStream(model)

    async def whole(self, answer: web.Response) -> web.Response:
        completion = _answer(answer)
        if completion is None:
            return answer  # messages() reshapes every error answer
        return web.json_response(completion_to_message(completion, self.model))

    def chunk(self, obj: dict) -> bytes:
        return _frames(self.stream.feed(obj))

    async def end(self) -> bytes:
        return _frames(self.stream.end())

    def error(self, message: str) -> bytes:
        return _frames([self.stream.failed(message)])


def _anthropic_error(status: int, message: str, headers: dict | None = None) -> web.Response:
    return web.json_response(error_body(status, message), status=status, headers=headers)


async def messages(request: web.Request) -> web.StreamResponse:
    """Anthropic clients send `x-api-key`; a bearer token works too. Errors are Anthropic-shaped."""
    services = request[SERVICES]
    try:
        tenant, body = await read_authenticated(request, services.config.limits.max_body_bytes,
                                                lambda: authenticated(request, services.sinks.policy))
        try:
            chat = messages_to_chat(body)
        except OpenAIError as refusal:
            await count_refusal(services.sinks.policy, request, tenant, refusal)
            raise
        answer = await generate(request, "chat", body=chat, tenant=tenant, shaper=MessagesShaper(body["model"]))
    except OpenAIError as err:
        return _anthropic_error(err.status, err.message, err.headers)
    if answer.status >= 400 and not answer.prepared:  # an upstream's OpenAI error body, passed on
        ours = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-")}
        return _anthropic_error(answer.status, json.loads(answer.body)["error"]["message"], ours)
    return answer
