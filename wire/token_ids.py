"""Token ids a request names (logit_bias keys, stop_token_ids, a prompt of ids) must exist in
the vocabulary that reads them: a 400 naming the parameter, never an id ignored or a crash."""
from __future__ import annotations

from .errors import bad_request


def named_token_ids(params, prompt=None) -> dict[str, int]:
    """The largest token id each parameter names (only the parameters that name any)."""
    largest = {}
    if params.surface.logit_bias:
        largest["logit_bias"] = max(params.surface.logit_bias)
    if params.stop_token_ids:
        largest["stop_token_ids"] = max(params.stop_token_ids)
    if isinstance(prompt, list) and prompt:
        largest["prompt"] = max(prompt)
    return largest


def check_token_ids(params, vocab_size: int, prompt=None, where: str = "the model") -> None:
    for param, largest in named_token_ids(params, prompt).items():
        if largest >= vocab_size:
            raise bad_request(f"'{param}' names token id {largest}, past the vocabulary of {where} "
                              f"({vocab_size} tokens: ids 0 to {vocab_size - 1})", param=param,
                              code="invalid_token_id")
