"""One quality sample: what the gateway served (or would have served), and how to read answers.

A sample is chosen before the answer is relayed (a streamed answer is tapped event by event,
bounded); everything else — parsing, the re-ask, scoring, storage — happens later, off the
client's path.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable

from .checks import Answer

MAX_TAPPED_BYTES = 256 * 1024  # a longer streamed answer is not sampled


@dataclass
class Sample:
    request_id: str
    tenant: str
    kind: str  # "chat" or "completion"
    body: dict
    route: object  # routing.Route
    candidate_tier: object  # config.Tier judged by this sample
    shadow: bool  # True: the request was moved off candidate_tier; its answer must be asked for
    predicted_level: int | None  # the classifier's own level (before any quality adjustment)
    reference_tier: object = None  # config.Tier the answer is judged against: the best the tenant may use
    served_tier: object = None
    served_body: bytes | None = None
    events: list[bytes] = field(default_factory=list)
    tapped: int = 0
    overflow: bool = False
    # a semantic cache hit: judged against its own tier's fresh answer, the verdict goes here
    on_verdict: Callable[[bool], None] | None = None
    # a cascaded answer: its verdict also calibrates the tenant's cascade threshold (cascade_learning.py)
    cascade: object = None  # cascade_learning.CascadeSample

    def tap(self, data: bytes) -> None:
        """Called by the stream relay with each SSE data payload; O(1), bounded."""
        self.tapped += len(data)
        if self.tapped > MAX_TAPPED_BYTES:
            self.overflow = True
            self.events.clear()
        elif not self.overflow:
            self.events.append(bytes(data))

    def served_answer(self) -> Answer:
        if self.served_body is not None:
            return parse_whole(self.served_body)
        return parse_events(self.events)


def parse_whole(body: bytes) -> Answer:
    obj = json.loads(body)
    choice = (obj.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    text = message.get("content") if "message" in choice else choice.get("text")
    usage = obj.get("usage") or {}
    return Answer(text or "", choice.get("finish_reason"), int(usage.get("completion_tokens") or 0))


def parse_events(events: list[bytes]) -> Answer:
    parts, finish, tokens = [], None, 0
    for data in events:
        obj = json.loads(data)
        for choice in obj.get("choices") or []:
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if piece:
                parts.append(piece)
            finish = choice.get("finish_reason") or finish
        if obj.get("usage"):
            tokens = int(obj["usage"].get("completion_tokens") or 0)
    return Answer("".join(parts), finish, tokens)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def features(route, body: dict) -> dict:
    """A small summary of the request (never its text)."""
    messages = body.get("messages")
    return {"prompt_chars": len(route.prompt_text), "messages": len(messages) if isinstance(messages, list) else 0,
            "estimated_prompt_tokens": route.estimated_prompt_tokens,
            "max_tokens": body.get("max_tokens") or body.get("max_completion_tokens")}


def request_record(body: dict, limit: int) -> str | None:
    """The request as a training row would need it ({"messages"} or {"prompt"}), or None if too long."""
    if isinstance(body.get("messages"), list):
        row = {"messages": [{"role": m.get("role"), "content": m.get("content")} for m in body["messages"]
                            if isinstance(m, dict) and isinstance(m.get("content"), str)]}
    elif isinstance(body.get("prompt"), str):
        row = {"prompt": body["prompt"]}
    else:
        return None
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else None
