"""A request's prompt as (role, text) turns, for the semantic cache; None for a prompt it does
not compare (images, audio, tool calls, a list of prompts): those are served by the exact
cache alone."""
from __future__ import annotations

PLAIN_MESSAGE_FIELDS = frozenset({"role", "content", "name"})


def _text(content) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return "\n".join(p["text"] for p in content)
    return None


def prompt_turns(kind: str, body: dict) -> list[tuple[str, str]] | None:
    if kind == "completion":
        prompt = body.get("prompt")
        return [("prompt", prompt)] if isinstance(prompt, str) else None
    turns = []
    for message in body.get("messages") or ():
        if not isinstance(message, dict) or not set(message) <= PLAIN_MESSAGE_FIELDS:
            return None
        text = _text(message.get("content"))
        if text is None:
            return None
        turns.append((str(message.get("role")), text))
    return turns or None
