"""A tier's tokenizer (its `tokenizer:` folder), to count an answer that came without usage:
loaded once, lazily, offline and off the event loop."""
from __future__ import annotations

import asyncio
import functools
import logging

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=16)
def _load(folder: str):
    from transformers import AutoTokenizer  # a heavy import, needed only on this rare path

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _count(folder: str, body: dict, prompt_text: str, relayed: list[str]) -> tuple[int, int]:
    tokenizer = _load(folder)
    messages = body.get("messages")
    if messages and getattr(tokenizer, "chat_template", None):
        prompt = len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
    else:
        prompt = len(tokenizer.encode(prompt_text))
    return prompt, len(tokenizer.encode("".join(relayed), add_special_tokens=False))


async def count_tokens(folder: str, body: dict, prompt_text: str, relayed: list[str]) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) by the tokenizer in `folder`; None when it cannot count
    (the folder holds no usable tokenizer, a message it cannot template): the caller estimates."""
    try:
        return await asyncio.to_thread(_count, folder, body, prompt_text, relayed)
    except Exception as exc:  # any failure of a third-party tokenizer: fall back to the estimate
        log.warning("tokenizer %s could not count a request: %s", folder, exc)
        return None
