"""Which request parameters each endpoint honours, and a named 400 for everything else.

No parameter is ever dropped silently: a key that is not in the endpoint's list is
refused by name, and known OpenAI parameters we cannot honour say why. The README's
"Supported parameters" section lists the same sets.
"""
from __future__ import annotations

from .errors import bad_request

_SAMPLING = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stop_token_ids", "ignore_eos",
    "stream", "stream_options", "n", "logprobs", "presence_penalty", "frequency_penalty", "repetition_penalty",
    "logit_bias", "user",
    "cascade",  # the gateway's own (docs/routing.md, Cascade): never sent on to a worker
}
CHAT_PARAMETERS = frozenset(_SAMPLING | {
    "messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
    "parallel_tool_calls", "store", "modalities", "service_tier",
})
COMPLETION_PARAMETERS = frozenset(_SAMPLING | {"prompt", "echo", "best_of", "response_format"})

# Known OpenAI parameters this server does not implement, with the reason given back.
_WHY_NOT = {
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported",
    "reasoning_effort": "these models do not reason; 'reasoning_effort' is not supported",
    "verbosity": "'verbosity' is not supported",
    "functions": "the legacy 'functions' parameter is not supported; use 'tools'",
    "function_call": "the legacy 'function_call' parameter is not supported; use 'tool_choice'",
    "metadata": "'metadata' is only stored by OpenAI's hosted service; this server stores nothing",
    "prompt_cache_key": "'prompt_cache_key' is not supported (prefix caching is automatic)",
    "cache_salt": "'cache_salt' is set by the gateway from the tenant (prefix caches are per tenant); a client "
                  "may not choose it",
    "safety_identifier": "'safety_identifier' is not supported",
    "suffix": "'suffix' (insertion) is not supported",
}


def check_parameters(body: dict, allowed: frozenset[str]) -> None:
    """A 400 naming the first parameter that is not honoured on this endpoint."""
    for name in body:
        if name in allowed:
            continue
        reason = _WHY_NOT.get(name, f"unsupported parameter '{name}'")
        raise bad_request(reason, param=name, code="unsupported_parameter")
    _only(body, "store", (None, False), "'store' must be false: this server stores no completions")
    _only(body, "echo", (None, False), "'echo' is not supported")
    _only(body, "best_of", (None, 1), "only 'best_of' = 1 is supported; use 'n'")
    _only(body, "service_tier", (None, "auto", "default"), "'service_tier' must be 'auto' or 'default'")
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise bad_request("only 'modalities' = [\"text\"] is supported", param="modalities", code="unsupported_value")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_request("'user' must be a string", param="user")


def _only(body: dict, name: str, values: tuple, message: str) -> None:
    value = body.get(name)
    if any(value is v or (value == v and type(value) is type(v)) for v in values):
        return
    raise bad_request(message, param=name, code="unsupported_value")
