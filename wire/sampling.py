"""The sampling surface beyond temperature/top-p: n, logprobs, penalties, logit_bias."""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import bad_request

MAX_N = 16
MAX_TOP_LOGPROBS = 20
MAX_LOGIT_BIAS = 300


@dataclass
class SamplingSurface:
    n: int = 1
    logprobs: bool = False
    top_logprobs: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float | None = None  # None: the model's generation default (or 1.0)
    logit_bias: dict[int, float] = field(default_factory=dict)


def _number(body: dict, name: str, lo: float, hi: float, default):
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
        raise bad_request(f"'{name}' must be a number between {lo} and {hi}", param=name)
    return float(value)


def _count(body: dict, name: str, lo: int, hi: int, default: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise bad_request(f"'{name}' must be an integer between {lo} and {hi}", param=name)
    return value


def _logit_bias(body: dict) -> dict[int, float]:
    value = body.get("logit_bias")
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_LOGIT_BIAS:
        raise bad_request(f"'logit_bias' must map at most {MAX_LOGIT_BIAS} token ids to numbers", param="logit_bias")
    bias = {}
    for key, amount in value.items():
        if not (isinstance(key, str) and key.isdigit()) or isinstance(amount, bool) \
                or not isinstance(amount, (int, float)) or not -100 <= amount <= 100:
            raise bad_request("'logit_bias' keys must be token ids and values numbers between -100 and 100",
                              param="logit_bias")
        bias[int(key)] = float(amount)
    return bias


def _logprobs(body: dict, chat: bool) -> tuple[bool, int]:
    """Chat: `logprobs` boolean + `top_logprobs` 0..20. Completions: `logprobs` integer 0..20."""
    value = body.get("logprobs")
    if chat:
        if value is not None and not isinstance(value, bool):
            raise bad_request("'logprobs' must be a boolean", param="logprobs")
        top = _count(body, "top_logprobs", 0, MAX_TOP_LOGPROBS, 0)
        if top and not value:
            raise bad_request("'top_logprobs' needs 'logprobs' = true", param="top_logprobs")
        return bool(value), top
    if value is None:
        return False, 0
    return True, _count(body, "logprobs", 0, MAX_TOP_LOGPROBS, 0)


def parse_sampling_surface(body: dict, chat: bool) -> SamplingSurface:
    logprobs, top = _logprobs(body, chat)
    return SamplingSurface(
        n=_count(body, "n", 1, MAX_N, 1),
        logprobs=logprobs,
        top_logprobs=top,
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0, 0.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0, 0.0),
        repetition_penalty=_number(body, "repetition_penalty", 0.01, 10.0, None),
        logit_bias=_logit_bias(body),
    )
