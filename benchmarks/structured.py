"""`python -m benchmarks.structured`: per-token cost of grammar-constrained decoding.

SmolLM2-135M, batch 1 and batch 8: the same prompts decoded free (ignore_eos) and under a
JSON-schema grammar that never closes before max_tokens (a long array of strings), so both
decode the same number of tokens. Only decode steps are timed (prefill is run first and
excluded). Free and constrained runs alternate in one process so machine noise hits both
alike; the figure is the median of per-round ratios. Goal: overhead <= 10%. The last
stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from backends.engine import EngineConfig, SamplingParams
from backends.engine.grammar import json_schema_grammar
from backends.engine.llm_engine import LLMEngine

SCHEMA = {"type": "object", "required": ["notes"], "properties": {
    "notes": {"type": "array", "minItems": 200, "items": {"type": "string", "maxLength": 60}}}}
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    engine = LLMEngine(EngineConfig(model=args.model, enable_prefix_caching=False))
    tok = engine.tokenizer
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True,
                                       return_dict=False) for p in PROMPTS]
    grammar = json_schema_grammar(SCHEMA)
    free = SamplingParams(max_tokens=args.max_tokens, temperature=0.7, seed=1, ignore_eos=True)
    constrained = SamplingParams(max_tokens=args.max_tokens, temperature=0.7, seed=1, ignore_eos=True, grammar=grammar)
    decode_seconds_per_token(engine, prompts[:2], free)  # warm-up (and the grammar's tokenizer view)
    decode_seconds_per_token(engine, prompts[:2], constrained)
    result: dict = {"benchmark": "structured", "model": args.model, "max_tokens": args.max_tokens,
                    "rounds": args.rounds}
    for batch in (1, 8):
        ratios, free_ms, constrained_ms = [], [], []
        for _ in range(args.rounds):
            f = decode_seconds_per_token(engine, prompts[:batch], free)
            c = decode_seconds_per_token(engine, prompts[:batch], constrained)
            free_ms.append(f * 1000)
            constrained_ms.append(c * 1000)
            ratios.append(c / f)
        overhead = statistics.median(ratios) - 1
        print(f"batch {batch}: free {statistics.median(free_ms):.2f} ms/token, constrained "
              f"{statistics.median(constrained_ms):.2f} ms/token, overhead {overhead:+.1%}", flush=True)
        result[f"batch{batch}"] = {"free_ms_per_token": round(statistics.median(free_ms), 3),
                                   "constrained_ms_per_token": round(statistics.median(constrained_ms), 3),
                                   "overhead": round(overhead, 4), "goal_met": overhead <= 0.10}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
