"""The text an answer or its stream chunks generated: what a tier's tokenizer counts when the
worker reported no usage."""
from __future__ import annotations

import json


def generated_texts(*payloads: bytes) -> list[str]:
    """The generated text in answers or stream chunks (for the tokenizer's count)."""
    out = []
    for payload in payloads:
        try:
            choices = json.loads(payload).get("choices") or []
        except (ValueError, AttributeError):
            continue
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            said = choice.get("delta") or choice.get("message")
            text = said.get("content") if isinstance(said, dict) else choice.get("text")
            if isinstance(text, str):
                out.append(text)
    return out
