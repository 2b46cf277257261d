"""`python -m benchmarks.speculative`: tokens/s with and without speculative decoding.

Two kinds of prompt: input-grounded (summarise / extract / edit a given text, where the
answer copies spans of the prompt and n-gram lookup drafts well) and open-ended. Each at
concurrency 1 (requests one after another) and 8 (all at once), greedy, on SmolLM2-135M.
Plain and speculative runs of one configuration alternate in the same process so machine
noise hits both alike. The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.model_runner import load_model
from backends.engine.model.models import model_dir

PASSAGE = (
    "The city council met on Monday evening to discuss the new bicycle lanes on Harbour Street. "
    "Residents said the lanes made the morning commute safer, but shop owners worried about losing "
    "parking spaces in front of their stores. The council agreed to run a six-month trial, to count "
    "cyclists and cars every week, and to publish the figures on its website. A final vote is planned "
    "for the spring, after a second public meeting in the library on Elm Road."
)
GROUNDED = [
    f"Here is a text:\n{PASSAGE}\nRewrite the text above, keeping every sentence but replacing 'council' with 'board'.",
    f"Text:\n{PASSAGE}\nCopy the sentences of the text that mention a place, word for word.",
    f"{PASSAGE}\nSummarise the text above in three sentences, reusing its wording.",
    f"Extract every sentence about the trial from this text, unchanged:\n{PASSAGE}",
    f"Correct the punctuation of this text and return it in full:\n{PASSAGE.lower()}",
    f"Text: {PASSAGE}\nList what the council agreed to do, quoting the text.",
    f"Read this and repeat the last two sentences exactly:\n{PASSAGE}",
    f"Turn this report into a bulleted list, one bullet per sentence, same words:\n{PASSAGE}",
]
OPEN = [
    "Write a short poem about autumn leaves.",
    "Give me three ideas for a birthday party for a ten-year-old.",
    "Explain why the sky is blue to a child.",
    "Describe a walk through a busy market in the morning.",
    "What are some good habits for learning a new language?",
    "Invent a name and a backstory for a friendly dragon.",
    "Write an opening line for a mystery novel.",
    "Suggest a weekend plan for someone who loves the outdoors.",
]


def chat_ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                              tokenize=True, return_dict=False))


def run(engine: LLMEngine, prompts: list[list[int]], concurrency: int, max_tokens: int) -> dict:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    stats = engine.spec_stats
    before = (stats.steps, stats.accepted_tokens)
    start = time.perf_counter()
    outputs = []
    for i in range(0, len(prompts), concurrency):
        outputs += engine.generate(prompts[i:i + concurrency], params)
    elapsed = time.perf_counter() - start
    steps, accepted = stats.steps - before[0], stats.accepted_tokens - before[1]
    return {"tokens_per_s": sum(map(len, outputs)) / elapsed,
            "accepted_per_step": (accepted + steps) / steps if steps else None, "outputs": outputs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--num-speculative-tokens", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per kind (at most 8)")
    args = parser.parse_args(argv)
    path = model_dir("smollm2-135m")
    plain = LLMEngine(EngineConfig(model="smollm2-135m"))
    tokenizer = plain.tokenizer
    spec = LLMEngine(EngineConfig(model="smollm2-135m", speculative="ngram",
                                  num_speculative_tokens=args.num_speculative_tokens),
                     model=load_model(path), tokenizer=tokenizer)
    result: dict = {"method": "ngram", "num_speculative_tokens": args.num_speculative_tokens,
                    "max_tokens": args.max_tokens}
    identical = True
    for kind, texts in (("grounded", GROUNDED), ("open", OPEN)):
        prompts = [chat_ids(tokenizer, t) for t in texts[:args.prompts]]
        for concurrency in (1, 8):
            run(plain, prompts[:1], 1, 8), run(spec, prompts[:1], 1, 8)  # warm-up
            base = run(plain, prompts, concurrency, args.max_tokens)
            fast = run(spec, prompts, concurrency, args.max_tokens)
            identical &= base["outputs"] == fast["outputs"]
            key = f"{kind}_c{concurrency}"
            result[f"speedup_{key}"] = round(fast["tokens_per_s"] / base["tokens_per_s"], 3)
            result[f"tokens_per_s_{key}"] = {"plain": round(base["tokens_per_s"], 2), "speculative": round(fast["tokens_per_s"], 2)}
            result[f"accepted_per_step_{key}"] = round(fast["accepted_per_step"] or 0, 3)
            print(f"[speculative] {key}: plain {base['tokens_per_s']:.1f} tok/s, speculative "
                  f"{fast['tokens_per_s']:.1f} tok/s, {fast['accepted_per_step']} tokens/step", file=sys.stderr, flush=True)
    result["accepted_per_step_grounded"] = result["accepted_per_step_grounded_c1"]
    result["greedy_outputs_identical"] = identical
    result["acceptance_rate"] = round(spec.spec_stats.acceptance_rate(), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
