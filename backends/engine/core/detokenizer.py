"""Incremental detokenization with stop strings.

Text is produced by decoding a short window of tokens twice (with and without the newest
tokens) and emitting the difference, so multi-token characters and tokenizers that merge
spaces come out right. A window that ends in U+FFFD (an incomplete UTF-8 sequence) is held
back until the character completes. Text that could be the start of a stop string is held
back too, so a stop string is never emitted, not even in part.
"""
from __future__ import annotations

REPLACEMENT = "\ufffd"
CONTEXT_TOKENS = 6  # prompt tokens kept as left context for the first decode


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_ids: list[int], stop: list[str] | None = None):
        self.tokenizer = tokenizer
        self.tokens = list(prompt_ids[-CONTEXT_TOKENS:])
        self.prefix_offset = 0
        self.read_offset = len(self.tokens)
        self.stop = [s for s in (stop or []) if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.text = ""  # decoded output so far
        self.emitted = 0  # chars of self.text already handed out
        self.stopped = False

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def add(self, token: int) -> None:
        self.tokens.append(token)
        if self.stopped:
            return
        before = self._decode(self.tokens[self.prefix_offset:self.read_offset])
        after = self._decode(self.tokens[self.prefix_offset:])
        if len(after) <= len(before) or after.endswith(REPLACEMENT):
            return  # nothing printable yet
        search_from = max(0, len(self.text) - self.hold)
        self.text += after[len(before):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self.tokens)
        for stop in self.stop:
            at = self.text.find(stop, search_from)
            if at >= 0:
                self.text = self.text[:at]
                self.stopped = True
                search_from = min(search_from, at)

    def take(self, final: bool) -> str:
        """Text that is safe to emit now; on the final call, everything left."""
        end = len(self.text) if (final or self.stopped) else max(self.emitted, len(self.text) - self.hold)
        delta = self.text[self.emitted:end]
        self.emitted = end
        return delta
