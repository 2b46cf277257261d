"""Validation of OpenAI chat and completion request bodies into typed objects.

Every rejection is an OpenAIError(400) naming the offending field, so both the gateway
and the workers answer bad input the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import bad_request
from .messages import normalise_messages
from .parameters import CHAT_PARAMETERS, COMPLETION_PARAMETERS, check_parameters
from .sampling import SamplingSurface, parse_sampling_surface
from .structured import (FunctionTool, ResponseFormat, ToolChoice, parse_parallel_tool_calls,
                         parse_response_format, parse_tool_choice, parse_tools)

MAX_STOP_STRINGS = 16
MAX_STOP_TOKEN_IDS = 256
MAX_INT = 2**31 - 1  # no count or length the engine takes is larger
SEED_RANGE = (-2**63, 2**63 - 1)  # a 64-bit seed, OpenAI's type; the engine's generator takes it whole


@dataclass
class GenerationParams:
    max_tokens: int | None = None
    temperature: float | None = None  # None: not set (the worker applies the model's generation defaults)
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    stream: bool = False
    include_usage: bool = False
    surface: SamplingSurface = field(default_factory=SamplingSurface)
    response_format: ResponseFormat | None = None
    tools: list[FunctionTool] = field(default_factory=list)
    tool_choice: ToolChoice = field(default_factory=lambda: ToolChoice("none"))
    parallel_tool_calls: bool = True
    cascade: bool | None = None  # the gateway's cascade asked on (True) or off (False); None: the tenant's mode

    @property
    def n(self) -> int:
        return self.surface.n


@dataclass
class ChatRequest:
    model: str
    messages: list[dict]
    params: GenerationParams
    raw: dict


@dataclass
class CompletionRequest:
    model: str
    prompt: str | list[int]
    params: GenerationParams
    raw: dict


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(body: dict, name: str, default: float | None, lo: float, hi: float) -> float | None:
    value = body.get(name)
    if value is None:
        return default
    if not _is_number(value) or not lo <= value <= hi:
        raise bad_request(f"'{name}' must be a number between {lo} and {hi}", param=name)
    return float(value)


def _int(body: dict, name: str, lo: int, hi: int = MAX_INT) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not _is_int(value) or not lo <= value <= hi:
        raise bad_request(f"'{name}' must be an integer from {lo} to {hi}", param=name)
    return value


def _bool(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"'{name}' must be a boolean", param=name)
    return value


def _optional_bool(body: dict, name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise bad_request(f"'{name}' must be a boolean", param=name)
    return value


def _model(body: dict) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("'model' is required and must be a non-empty string", param="model")
    return model


def parse_params(body: dict, chat: bool) -> GenerationParams:
    check_parameters(body, CHAT_PARAMETERS if chat else COMPLETION_PARAMETERS)
    max_tokens = _int(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", 1)
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > MAX_STOP_STRINGS or not all(isinstance(s, str) and s for s in stop):
        raise bad_request(f"'stop' must be a non-empty string or a list of at most {MAX_STOP_STRINGS} of them", param="stop")
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or len(stop_ids) > MAX_STOP_TOKEN_IDS \
            or not all(_is_int(t) and 0 <= t <= MAX_INT for t in stop_ids):
        raise bad_request(f"'stop_token_ids' must be a list of at most {MAX_STOP_TOKEN_IDS} token ids",
                          param="stop_token_ids")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    for key in options:
        if key != "include_usage":
            raise bad_request(f"'stream_options.{key}' is not supported", param=f"stream_options.{key}",
                              code="unsupported_parameter")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("'stream_options.include_usage' must be a boolean", param="stream_options")
    seed = _int(body, "seed", *SEED_RANGE)
    tools = parse_tools(body) if chat else []
    return GenerationParams(
        surface=parse_sampling_surface(body, chat),
        response_format=parse_response_format(body),
        tools=tools,
        tool_choice=parse_tool_choice(body, tools) if chat else ToolChoice("none"),
        parallel_tool_calls=parse_parallel_tool_calls(body),
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", None, 0.0, 2.0),
        top_p=_number(body, "top_p", None, 0.0, 1.0),
        top_k=_int(body, "top_k", -1),
        seed=seed,
        stop=stop,
        stop_token_ids=list(stop_ids),
        ignore_eos=_bool(body, "ignore_eos"),
        stream=_bool(body, "stream"),
        include_usage=include_usage,
        cascade=_optional_bool(body, "cascade"),
    )


def parse_chat(body: dict) -> ChatRequest:
    model = _model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", param="messages")
    return ChatRequest(model=model, messages=normalise_messages(messages), params=parse_params(body, True), raw=body)


def parse_completion(body: dict) -> CompletionRequest:
    model = _model(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(_is_int(t) and 0 <= t <= MAX_INT for t in prompt):
        pass
    elif not isinstance(prompt, str) or not prompt:
        raise bad_request("'prompt' must be a non-empty string (or one list of token ids)", param="prompt")
    return CompletionRequest(model=model, prompt=prompt, params=parse_params(body, False), raw=body)


def conversation_text(messages: list[dict]) -> str:
    """All message contents in order, for classification and prefix hashing."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)
