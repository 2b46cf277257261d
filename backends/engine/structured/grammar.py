"""Grammar-constrained decoding with llguidance: one matcher per constrained sequence.

A request's constraint arrives as an llguidance grammar string (built from a JSON schema,
`json_object`, or the tool-call grammar in backends/serving/tool_grammar.py). Each step,
every constrained sequence that samples fills its row of an int32 token bitmask (one bit
per token id); the sampler masks those rows' logits, so constrained and free sequences
share the same forward pass. EOS is in the mask only while the grammar accepts, so the
output always parses; a grammar that can go no further ends the sequence ("stop").
"""
from __future__ import annotations

import threading

import llguidance
import llguidance.hf
import torch

JSON_OPTIONS = {"whitespace_flexible": False}  # compact JSON: fewer tokens, no whitespace loops


class GrammarError(ValueError):
    """The grammar (schema) cannot be compiled: the server answers 400."""


def closed_objects(schema):
    """The schema with `additionalProperties: false` wherever an object lists its properties
    and says nothing about others (xgrammar's strict mode does the same). Every output is
    still valid against the original schema; the model just cannot invent extra keys."""
    if isinstance(schema, list):
        return [closed_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: closed_objects(sub) for name, sub in value.items()}  # a map of schemas
        elif key in ("enum", "const", "default", "examples"):
            out[key] = value  # values, not schemas
        else:
            out[key] = closed_objects(value)
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def json_schema_grammar(schema: dict) -> str:
    return llguidance.LLMatcher.grammar_from_json_schema(closed_objects(schema), defaults=JSON_OPTIONS)


def json_object_grammar() -> str:
    return json_schema_grammar({"type": "object"})


def lark_grammar(lark: str) -> str:
    return llguidance.LLMatcher.grammar_from_lark(lark)


class GrammarCompiler:
    """Owns the llguidance view of the tokenizer (built once: it is slow to build) and makes matchers."""

    def __init__(self, tokenizer, vocab_size: int, eos_token_ids: set[int]):
        self._tokenizer = tokenizer
        self.vocab_size = max(vocab_size, len(tokenizer))
        self._eos = sorted(eos_token_ids)
        self._lock = threading.Lock()
        self._ll_tokenizer = None
        self.executor = llguidance.LLExecutor()

    def ll_tokenizer(self) -> llguidance.LLTokenizer:
        with self._lock:
            if self._ll_tokenizer is None:
                self._ll_tokenizer = llguidance.hf.from_tokenizer(self._tokenizer, n_vocab=self.vocab_size,
                                                                  eos_token=self._eos or None)
            return self._ll_tokenizer

    def matcher(self, grammar: str) -> llguidance.LLMatcher:
        matcher = llguidance.LLMatcher(self.ll_tokenizer(), grammar, log_level=0)
        if matcher.is_error():
            raise GrammarError(f"cannot compile the requested format: {matcher.get_error()[:300]}")
        return matcher

    def fill_bitmask(self, matchers: list[llguidance.LLMatcher]) -> torch.Tensor:
        """[len(matchers), ceil(V/32)] int32: bit t of a row is set when token t is allowed."""
        words = (self.vocab_size + 31) // 32
        bitmask = torch.full((len(matchers), words), -1, dtype=torch.int32)
        # (llguidance.torch has the same helper but torch.compiles at import; we need only this call)
        self.executor.unsafe_compute_mask_ptr([(m, i) for i, m in enumerate(matchers)], bitmask.data_ptr(),
                                              words * 4, len(matchers))
        return bitmask
