"""A request's prompt as (role, text) turns, for the semantic cache; None for a prompt it does
not compare (images, audio, tool calls, a list of prompts, or more than MAX_PROMPT_CHARS of
text, which the guard would read on the event loop): those are served by the exact cache alone."""
from __future__ import annotations

PLAIN_MESSAGE_FIELDS = frozenset({"role", "content", "name"})
MAX_PROMPT_CHARS = 32768


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
        return [("prompt", prompt)] if isinstance(prompt, str) and len(prompt) <= MAX_PROMPT_CHARS else None
    turns, size = [], 0
    for message in body.get("messages") or ():
        if not isinstance(message, dict) or not set(message) <= PLAIN_MESSAGE_FIELDS:
            return None
        text = _text(message.get("content"))
        size += len(text) if text is not None else 0
        if text is None or size > MAX_PROMPT_CHARS:
            return None
        name = f":{message['name']}" if "name" in message else ""  # a participant's name can change the answer
        turns.append((f"{message.get('role')}{name}", text))
    return turns or None
