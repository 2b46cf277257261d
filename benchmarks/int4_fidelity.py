"""`python -m benchmarks.int4_fidelity`: does the int4 tier (the GGUF's own Q4_1 blocks) answer
like fp32 (the same GGUF dequantised)? On 50 fixed chat questions (benchmarks/chat_prompts.py),
greedy, up to 48 tokens each: how many answers are token-identical, the share of tokens up to
each answer's first divergence, and teacher-forced argmax agreement on fp32's answers.
Last line: one JSON object."""
from __future__ import annotations

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from backends.engine import EngineConfig, SamplingParams  # noqa: E402
from backends.engine.core.llm_engine import LLMEngine  # noqa: E402
from benchmarks.chat_prompts import CHAT_PROMPTS  # noqa: E402
from measure.agreement import teacher_forced_agreement  # noqa: E402

MAX_TOKENS = 48


def main() -> None:
    started = time.perf_counter()
    engines = {name: LLMEngine(EngineConfig(model="smollm2-135m", kv_cache_bytes=256 << 20, quantization=q))
               for name, q in (("fp32", None), ("int4", "int4"))}
    tokenizer = engines["fp32"].tokenizer
    prompts = [tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                                              add_generation_prompt=True, tokenize=False))
               for q in CHAT_PROMPTS]
    greedy = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0)
    answers = {name: engine.generate(prompts, greedy) for name, engine in engines.items()}
    fp32, int4 = answers["fp32"], answers["int4"]
    prefix = sum(next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), min(len(x), len(y)))
                 for x, y in zip(int4, fp32)) / sum(map(len, fp32))
    result = {
        "prompts": len(prompts), "identical_answers": sum(a == b for a, b in zip(int4, fp32)),
        "prefix_agreement": round(prefix, 4),
        "teacher_forced_agreement": round(teacher_forced_agreement(engines["int4"].model, prompts, fp32), 4),
        "paris_on_int4": "Paris" in tokenizer.decode(int4[0]), "seconds": round(time.perf_counter() - started, 1),
    }
    for q, a, b in zip(CHAT_PROMPTS, fp32, int4):
        if a != b:
            print(f"differs: {q!r}\n  fp32: {tokenizer.decode(a)!r}\n  int4: {tokenizer.decode(b)!r}", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
