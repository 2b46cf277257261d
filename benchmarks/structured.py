"""`python -m benchmarks.structured`: per-token cost of grammar-constrained decoding, and how
often structured answers are valid with and without length-aware closing.

Cost: SmolLM2-135M, batch 1 and batch 8: the same prompts decoded free (ignore_eos), under a
JSON-schema grammar (an array of at least 8 strings of up to 60 characters), and under
the same grammar with the length guard on (which forces the closing near the end). Only
decode steps are timed (prefill is run first and excluded). The runs alternate in one process
so machine noise hits them alike; each figure is the median of per-round ratios. Goals:
grammar overhead <= 10%, guard overhead <= 10%.

Validity (`--validity N`, default 200): N requests over the 20 schemas of
structured_schemas.py and `json_object`, temperature 0.7, max_tokens drawn from 16-200, run
once with the guard and once without; the share that parses and validates (a request whose
format cannot fit gets its 400, counted apart). Goal: 100% with the guard. The last stdout
line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from backends.engine import EngineConfig, SamplingParams
import random

import jsonschema

from backends.engine.structured.grammar import closed_objects, json_object_grammar, json_schema_grammar
from backends.engine.structured.length_guard import FormatNeedsMoreTokens
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.structured.output_shape import OutputShape
from benchmarks.structured_schemas import SCHEMAS

SCHEMA = {"type": "object", "required": ["notes"], "properties": {
    "notes": {"type": "array", "minItems": 8, "items": {"type": "string", "maxLength": 60}}}}
PROMPTS = ["Write notes about the sea.", "List facts about trains.", "Describe a forest walk.",
           "Notes on cooking rice.", "Facts about the moon.", "Describe a busy market.",
           "Notes about winter.", "List things in a kitchen."]


def decode_seconds_per_token(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> float:
    seqs = [engine.add_request(p, params) for p in prompts]
    while any(s.num_output_tokens == 0 for s in seqs):  # prefill (and the first token) untimed
        engine.step()
    before = sum(s.num_output_tokens for s in seqs)
    start = time.perf_counter()
    while engine.has_work():
        engine.step()
    elapsed = time.perf_counter() - start
    return elapsed / (sum(s.num_output_tokens for s in seqs) - before)


def validity(engine: LLMEngine, n: int, guard: bool) -> dict:
    """N structured requests run together; the share whose output parses and validates."""
    draws = random.Random(0)
    kinds = [(f"Return a JSON object describing {topic}.", schema) for topic, schema in SCHEMAS]
    kinds.append(("Return a JSON object with keys 'fruit' and 'count' describing a basket.", None))
    seqs, refused = [], 0
    for i in range(n):
        text, schema = kinds[draws.randrange(len(kinds))]
        max_tokens = draws.randint(16, 200)
        prompt = engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                      tokenize=True, return_dict=False)
        shape = OutputShape(answer=closed_objects(schema or {"type": "object"}))
        params = SamplingParams(max_tokens=max_tokens, temperature=0.7, seed=i, close_in_budget=guard,
                                grammar=json_schema_grammar(schema) if schema else json_object_grammar(), shape=shape)
        try:
            seqs.append((engine.add_request(prompt, params), schema or {"type": "object"}))
        except FormatNeedsMoreTokens:
            refused += 1
    started = time.perf_counter()
    reported = -1
    while engine.has_work():
        engine.step()
        done = sum(s.is_finished for s, _ in seqs)
        if done // 10 != reported // 10:
            reported = done
            print(f"validity (guard {'on' if guard else 'off'}): {done}/{len(seqs)} done", flush=True)
    valid = cut = 0
    for seq, schema in seqs:
        cut += seq.finish_reason == "length"
        try:
            jsonschema.validate(json.loads(engine.tokenizer.decode(seq.output_ids, skip_special_tokens=True)), schema)
            valid += 1
        except (ValueError, jsonschema.ValidationError):
            pass
    return {"requests": n, "refused_400": refused, "served": len(seqs), "valid": valid, "length_finished": cut,
            "valid_share": round(valid / max(1, len(seqs)), 4), "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--validity", type=int, default=200, help="requests in the validity run (0: skip it)")
    args = parser.parse_args(argv)
    engine = LLMEngine(EngineConfig(model=args.model, enable_prefix_caching=False))
    tok = engine.tokenizer
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True,
                                       return_dict=False) for p in PROMPTS]
    grammar = json_schema_grammar(SCHEMA)
    shape = OutputShape(answer=closed_objects(SCHEMA))
    free = SamplingParams(max_tokens=args.max_tokens, temperature=0.7, seed=1, ignore_eos=True)
    constrained = SamplingParams(max_tokens=args.max_tokens, temperature=0.7, seed=1, ignore_eos=True, grammar=grammar)
    guarded = SamplingParams(max_tokens=args.max_tokens, temperature=0.7, seed=1, ignore_eos=True, grammar=grammar,
                             shape=shape)
    runs = {"free": free, "constrained": constrained, "guarded": guarded}
    for params in runs.values():  # warm-up (and the grammar's tokenizer view)
        decode_seconds_per_token(engine, prompts[:2], params)
    result: dict = {"benchmark": "structured", "model": args.model, "max_tokens": args.max_tokens,
                    "rounds": args.rounds}
    for batch in (1, 8):
        ms = {name: [] for name in runs}
        grammar_ratio, guard_ratio = [], []
        for _ in range(args.rounds):
            for name, params in runs.items():
                ms[name].append(decode_seconds_per_token(engine, prompts[:batch], params) * 1000)
            grammar_ratio.append(ms["constrained"][-1] / ms["free"][-1])
            guard_ratio.append(ms["guarded"][-1] / ms["constrained"][-1])
        overhead, guard_overhead = statistics.median(grammar_ratio) - 1, statistics.median(guard_ratio) - 1
        print(f"batch {batch}: free {statistics.median(ms['free']):.2f} ms/token, constrained "
              f"{statistics.median(ms['constrained']):.2f}, guarded {statistics.median(ms['guarded']):.2f}; "
              f"grammar overhead {overhead:+.1%}, guard overhead {guard_overhead:+.1%}", flush=True)
        result[f"batch{batch}"] = {**{f"{k}_ms_per_token": round(statistics.median(v), 3) for k, v in ms.items()},
                                   "overhead": round(overhead, 4), "guard_overhead": round(guard_overhead, 4),
                                   "goal_met": overhead <= 0.10 and guard_overhead <= 0.10}
    if args.validity:
        result["validity"] = {"guard_off": validity(engine, args.validity, False),
                              "guard_on": validity(engine, args.validity, True)}
        result["validity"]["goal_met"] = result["validity"]["guard_on"]["valid_share"] == 1.0
    print(json.dumps(result))


if __name__ == "__main__":
    main()
