"""Internal chat completion (whole, or its chunk stream) -> OpenAI Responses API objects and events.

Pure: no I/O. The streamed event order follows the Responses API: response.created,
response.in_progress, then per output item output_item.added, (content_part.added,
output_text.delta..., output_text.done, content_part.done | function_call_arguments.delta...,
function_call_arguments.done), output_item.done, and response.completed with usage.
"""
from __future__ import annotations

import time
import uuid

from .chat_stream import ChatChunkTranslator

ECHOED = ("instructions", "tools", "tool_choice", "text", "temperature", "top_p", "max_output_tokens",
          "previous_response_id", "store", "metadata", "parallel_tool_calls")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def response_usage(usage: dict | None) -> dict:
    usage = usage or {}
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def response_object(request: dict, response_id: str, model: str, output: list[dict], status: str,
                    usage: dict | None, finish_reason: str | None = None) -> dict:
    echoed = {key: request.get(key) for key in ECHOED}
    echoed["tools"] = echoed["tools"] or []
    echoed["tool_choice"] = echoed["tool_choice"] or "auto"
    echoed["store"] = request.get("store", True)
    echoed["metadata"] = echoed["metadata"] or {}
    echoed["parallel_tool_calls"] = request.get("parallel_tool_calls", True)
    echoed["text"] = echoed["text"] or {"format": {"type": "text"}}
    incomplete = status == "completed" and finish_reason == "length"
    return {"id": response_id, "object": "response", "created_at": int(time.time()),
            "status": "incomplete" if incomplete else status, "model": model, "output": output,
            "error": None, "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "usage": response_usage(usage) if usage is not None else None, **echoed}


def message_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


def output_items(message: dict) -> list[dict]:
    items = []
    if message.get("content"):
        items.append(message_item(new_id("msg"), message["content"]))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        items.append(call_item(new_id("fc"), call.get("id") or new_id("call"), fn.get("name", ""),
                               fn.get("arguments") or "{}"))
    return items


def completion_to_response(completion: dict, request: dict, response_id: str, model: str) -> dict:
    choice = (completion.get("choices") or [{}])[0]
    return response_object(request, response_id, model, output_items(choice.get("message") or {}), "completed",
                           completion.get("usage") or {}, choice.get("finish_reason"))


def assistant_message(response: dict) -> dict:
    """The response's output as one chat message, for the stored conversation."""
    text = "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"])
    calls = [{"id": item["call_id"], "type": "function", "function": {"name": item["name"],
                                                                      "arguments": item["arguments"]}}
             for item in response["output"] if item["type"] == "function_call"]
    return {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}


class ResponsesStream(ChatChunkTranslator):
    """Feed chat chunks in order; get (event name, payload) pairs out."""

    def __init__(self, request: dict, response_id: str, model: str):
        super().__init__()
        self.request, self.response_id, self.model = request, response_id, model
        self.seq = 0
        self.done: list[tuple[int, dict]] = []  # finished items with their output_index
        self.text_item: dict | None = None  # the open message item: {"id", "index", "text"}
        self.calls: dict[int, dict] = {}  # chat tool-call index -> open function_call item

    def _event(self, kind: str, **fields) -> tuple[str, dict]:
        self.seq += 1
        return kind, {"type": kind, "sequence_number": self.seq - 1, **fields}

    def _snapshot(self, status: str) -> dict:
        output = [item for _, item in sorted(self.done, key=lambda pair: pair[0])]
        return response_object(self.request, self.response_id, self.model, output, status,
                               self.usage if status != "in_progress" else None, self.finish_reason)

    def start(self) -> list[tuple[str, dict]]:
        self.started = True
        return [self._event("response.created", response=self._snapshot("in_progress")),
                self._event("response.in_progress", response=self._snapshot("in_progress"))]

    def on_text(self, text: str) -> list[tuple[str, dict]]:
        events = []
        if self.text_item is None:
            self.text_item = {"id": new_id("msg"), "index": self._next_index(), "text": ""}
            where = {"item_id": self.text_item["id"], "output_index": self.text_item["index"], "content_index": 0}
            events += [self._event("response.output_item.added", output_index=self.text_item["index"],
                                   item=message_item(self.text_item["id"], "", "in_progress")),
                       self._event("response.content_part.added", **where,
                                   part={"type": "output_text", "text": "", "annotations": []})]
        self.text_item["text"] += text
        return events + [self._event("response.output_text.delta", item_id=self.text_item["id"],
                                     output_index=self.text_item["index"], content_index=0, delta=text, logprobs=[])]

    def on_call(self, call: dict) -> list[tuple[str, dict]]:
        events = []
        fn = call.get("function") or {}
        open_call = self.calls.get(call.get("index", 0))
        if open_call is None:
            events += self._close_text()
            open_call = {"id": new_id("fc"), "index": self._next_index(), "call_id": call.get("id") or new_id("call"),
                         "name": fn.get("name") or "", "arguments": ""}
            self.calls[call.get("index", 0)] = open_call
            events.append(self._event("response.output_item.added", output_index=open_call["index"],
                                      item=call_item(open_call["id"], open_call["call_id"], open_call["name"], "",
                                                     "in_progress")))
        if fn.get("arguments"):
            open_call["arguments"] += fn["arguments"]
            events.append(self._event("response.function_call_arguments.delta", item_id=open_call["id"],
                                      output_index=open_call["index"], delta=fn["arguments"]))
        return events

    def _next_index(self) -> int:
        return len(self.done) + (self.text_item is not None) + len(self.calls)

    def _close_text(self) -> list[tuple[str, dict]]:
        item, self.text_item = self.text_item, None
        if item is None:
            return []
        where = {"item_id": item["id"], "output_index": item["index"], "content_index": 0}
        done = message_item(item["id"], item["text"])
        self.done.append((item["index"], done))
        return [self._event("response.output_text.done", **where, text=item["text"], logprobs=[]),
                self._event("response.content_part.done", **where, part=done["content"][0]),
                self._event("response.output_item.done", output_index=item["index"], item=done)]

    def end(self) -> list[tuple[str, dict]]:
        """After the last chunk: close open items, then response.completed (with usage)."""
        events = self.opening() + self._close_text()
        for call in self.calls.values():
            arguments = call["arguments"] or "{}"
            done = call_item(call["id"], call["call_id"], call["name"], arguments)
            self.done.append((call["index"], done))
            events += [self._event("response.function_call_arguments.done", item_id=call["id"],
                                   output_index=call["index"], name=call["name"], arguments=arguments),
                       self._event("response.output_item.done", output_index=call["index"], item=done)]
        self.calls = {}
        return events + [self._event("response.completed", response=self.response())]

    def response(self) -> dict:
        return self._snapshot("completed")

    def failed(self, message: str) -> tuple[str, dict]:
        return self._event("error", code="upstream_error", message=message, param=None)

