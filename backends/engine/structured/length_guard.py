"""Constrained outputs that finish within max_tokens.

A grammar guarantees the shape only if generation reaches its end. The guard keeps every
constrained sequence able to get there: a sampled token is kept only while the shortest
closing after it (output_shape.py) still fits in the tokens left; otherwise the closing of the
text so far is forced, token by token, and the sequence ends with finish_reason "length".
Each forced closing is checked against the grammar's matcher first; where the reader cannot
vouch for a closing (a string under a `pattern`), the guard stands aside.
"""
from __future__ import annotations

import logging

from .json_shape import Unclosable
from .output_shape import OutputReader, OutputShape

log = logging.getLogger("tiergate.engine")


class FormatNeedsMoreTokens(ValueError):
    """Even the shortest output the format allows does not fit in max_tokens (a 400)."""

    def __init__(self, needed: int, max_tokens: int):
        super().__init__(f"the requested format needs at least {needed} tokens, more than max_tokens ({max_tokens})")
        self.needed = needed


class LengthGuard:
    def __init__(self, shape: OutputShape, ll_tokenizer, matcher, max_tokens: int):
        self.reader = OutputReader(shape)
        self.tokenizer, self.matcher = ll_tokenizer, matcher
        self.forced: list[int] = []
        self.forcing = self.closed = self.off = False
        shortest = self._verified(self.reader.closing())
        if shortest is None:
            self.off = True
        elif len(shortest) > max_tokens:
            raise FormatNeedsMoreTokens(len(shortest), max_tokens)

    def choose(self, sampled: int, left: int, is_stop: bool) -> int:
        """The token to append instead of `sampled`, with `left` output tokens left counting it."""
        if self.forcing:
            return self._next_forced()
        if self.off or is_stop:
            return sampled
        try:
            after = self.reader.copy()
            after.feed(self.tokenizer.decode_bytes([sampled]))
            closing = after.closing()
        except Unclosable:
            closing = None
        if closing is None:
            self.off = True  # from here on the reader cannot tell: the grammar alone decides
            return sampled
        if self._fits(closing, left - 1):
            self.reader = after
            return sampled
        tokens = self._verified(self.reader.closing())
        if not tokens or len(tokens) > left:
            self.off = True
            log.debug("length guard: no closing fits (%s tokens left)", left)
            return sampled
        self.forced, self.forcing = tokens, True
        return self._next_forced()

    def _next_forced(self) -> int:
        token = self.forced.pop(0)
        self.closed = not self.forced
        return token

    def _fits(self, closing: bytes, left: int) -> bool:
        return len(closing) <= left or len(self.tokenizer.tokenize_bytes(closing)) <= left

    def _verified(self, closing: bytes | None) -> list[int] | None:
        """The closing's tokens if the grammar takes them from here and then accepts."""
        if closing is None:
            return None
        tokens = self.tokenizer.tokenize_bytes(closing)
        probe = self.matcher.deep_copy()
        if probe.try_consume_tokens(tokens) != len(tokens) or not probe.is_accepting():
            return None
        return tokens
