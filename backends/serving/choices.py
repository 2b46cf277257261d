"""One choice of a response, built from the engine's deltas: text or tool calls, logprobs,
finish reason; as a whole (non-streamed) or as stream chunks."""
from __future__ import annotations

from backends.engine.core.async_engine import Delta

from .tool_calls import ToolCallStream, parse_tool_calls


def _token_text(tokenizer, token: int) -> str:
    return tokenizer.decode([token], skip_special_tokens=False, clean_up_tokenization_spaces=False)


class LogprobFormatter:
    """Engine logprob entries into the chat shape or the completions shape."""

    def __init__(self, tokenizer, chat: bool):
        self.tokenizer, self.chat = tokenizer, chat
        self.offset = 0

    def _entry(self, token: int, logprob: float) -> dict:
        text = _token_text(self.tokenizer, token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    def format(self, entries: list) -> dict:
        if self.chat:
            return {"content": [{**self._entry(t, lp), "top_logprobs": [self._entry(i, v) for i, v in top]}
                                for t, lp, top in entries]}
        tokens = [_token_text(self.tokenizer, t) for t, _, _ in entries]
        offsets = []
        for text in tokens:
            offsets.append(self.offset)
            self.offset += len(text)
        return {"tokens": tokens, "token_logprobs": [lp for _, lp, _ in entries],
                "top_logprobs": [{_token_text(self.tokenizer, i): v for i, v in top} for _, _, top in entries],
                "text_offset": offsets}


class Choice:
    def __init__(self, index: int, chat: bool, tools: bool, tokenizer, logprobs: bool):
        self.index, self.chat, self.tools = index, chat, tools
        self.text: list[str] = []
        self.logprob_entries: list = []
        self.logprobs = LogprobFormatter(tokenizer, chat) if logprobs else None
        self.stream_calls = ToolCallStream() if tools else None
        self.num_output_tokens = 0
        self.finish_reason: str | None = None
        self.last: Delta | None = None

    def add(self, delta: Delta) -> None:
        self.text.append(delta.text)
        if delta.logprobs:
            self.logprob_entries.extend(delta.logprobs)
        self.num_output_tokens = delta.num_output_tokens
        self.last = delta
        if delta.finished:
            self.finish_reason = delta.finish_reason

    def _finish_reason(self, called: bool) -> str | None:
        return "tool_calls" if called and self.finish_reason == "stop" else self.finish_reason

    def whole(self) -> dict:
        text = "".join(self.text)
        logprobs = self.logprobs.format(self.logprob_entries) if self.logprobs else None
        if not self.chat:
            return {"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": self.finish_reason}
        calls = parse_tool_calls(text) if self.tools else None
        message = {"role": "assistant", "content": None if calls else text}
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        return {"index": self.index, "message": message, "logprobs": logprobs,
                "finish_reason": self._finish_reason(bool(calls))}

    def chunk(self, delta: Delta) -> dict | None:
        """This delta as a stream choice, or None when there is nothing to send yet."""
        self.add(delta)
        finish = self._finish_reason(bool(self.stream_calls and self.stream_calls.num_calls)) \
            if delta.finished else None
        logprobs = self.logprobs.format(delta.logprobs) if self.logprobs and delta.logprobs else None
        if not self.chat:
            if not (delta.text or delta.finished or logprobs):
                return None
            return {"index": self.index, "text": delta.text, "logprobs": logprobs, "finish_reason": finish}
        body: dict = {}
        text = delta.text
        if self.stream_calls is not None:
            text, calls = self.stream_calls.feed(delta.text, delta.finished)
            if calls:
                body["tool_calls"] = calls
            if delta.finished:
                finish = self._finish_reason(bool(self.stream_calls.num_calls))
        if text:
            body["content"] = text
        if not (body or delta.finished or logprobs):
            return None
        return {"index": self.index, "delta": body, "logprobs": logprobs, "finish_reason": finish}
