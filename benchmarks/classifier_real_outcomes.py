"""An outcome set from real answers, for the outcome simulation of `python -m benchmarks.classifier`.

Every question of benchmarks/data/checkable_questions.jsonl is put, greedy, to the two models
we ship: SmolLM2-135M-Instruct as a chat model (64 tokens) and Gemma 3 270M base as a
completion model ("Question: ...\\nAnswer:", 24 tokens, cut at the first line break). An
answer is correct when one of the question's `accept` strings occurs in it as a whole word.
The model that answers more questions correctly plays the strong tier (level 4), the other
the weak one (level 1).

Answering takes a few minutes on 2 cores, so the outcome lines are cached under the model
cache (`~/.cache/tiergate/outcomes/`), keyed by the question file and these settings;
`--rebuild` redoes them. Run alone: `python -m benchmarks.classifier_real_outcomes` prints the accuracies.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.models import cache_root

QUESTIONS = Path(__file__).resolve().parent / "data" / "checkable_questions.jsonl"
# The chat model reasons before it answers, so it gets room to finish; the base model's answer
# is its first line.
MAX_TOKENS = {"smollm2-135m": 64, "gemma3-270m": 24}
BATCH = 32


def log(message: str) -> None:
    print(f"[real-outcomes] {message}", file=sys.stderr, flush=True)


def correct(answer: str, accept: list[str]) -> bool:
    text = " ".join(answer.lower().split())
    return any(re.search(r"(?<![\w.])" + re.escape(a.lower()) + r"(?![\w])", text) for a in accept)


def _answers(model: str, prompts: list[list[int]], first_line: bool) -> list[str]:
    engine = LLMEngine(EngineConfig(model=model, kv_cache_bytes=128 << 20))
    params = SamplingParams(max_tokens=MAX_TOKENS[model], temperature=0.0)
    texts = []
    for start in range(0, len(prompts), BATCH):
        ids = engine.generate(prompts[start:start + BATCH], params)
        texts += [engine.tokenizer.decode(out, skip_special_tokens=True) for out in ids]
        log(f"{model}: {len(texts)}/{len(prompts)} answered")
    return [t.strip().split("\n")[0] if first_line else t.strip() for t in texts]


def _prompts(model: str, questions: list[dict]) -> list[list[int]]:
    from backends.engine.model.models import load_tokenizer, model_dir

    tokenizer = load_tokenizer(model_dir(model))
    if model == "smollm2-135m":  # chat
        return [list(tokenizer.apply_chat_template([{"role": "user", "content": q["prompt"]}],
                                                   add_generation_prompt=True, tokenize=True, return_dict=False))
                for q in questions]
    return [tokenizer.encode(f"Question: {q['prompt']}\nAnswer:") for q in questions]  # a base model


def build(rebuild: bool = False) -> tuple[list[dict], dict]:
    """(outcome lines, summary); cached per question file."""
    raw = QUESTIONS.read_bytes()
    key = hashlib.sha256(raw + json.dumps(MAX_TOKENS, sort_keys=True).encode()).hexdigest()[:12]
    cache = cache_root() / "outcomes" / f"checkable-{key}.jsonl"
    questions = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    if cache.exists() and not rebuild:
        lines = [json.loads(line) for line in cache.read_text().splitlines()]
        return [line["outcome"] for line in lines], lines[0]["summary"]
    right = {}
    for model, first_line in (("smollm2-135m", False), ("gemma3-270m", True)):
        answers = _answers(model, _prompts(model, questions), first_line)
        right[model] = [correct(a, q["accept"]) for a, q in zip(answers, questions)]
    accuracy = {m: round(sum(r) / len(r), 4) for m, r in right.items()}
    strong = max(accuracy, key=accuracy.get)
    weak = min(accuracy, key=accuracy.get) if len(set(accuracy.values())) > 1 else "gemma3-270m"
    summary = {"questions": len(questions), "accuracy": accuracy, "strong": strong, "weak": weak,
               "accuracy_by_tier": {m: {str(t): round(sum(r for r, q in zip(right[m], questions) if q["tier"] == t)
                                                  / max(1, sum(q["tier"] == t for q in questions)), 4)
                                        for t in (1, 2, 3, 4)} for m in right}}
    outcomes = [{"prompt": q["prompt"], "outcomes": {"1": w, "4": s}}
                for q, w, s in zip(questions, right[weak], right[strong])]
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps({"outcome": o, "summary": summary}) + "\n" for o in outcomes))
    tmp.replace(cache)
    return outcomes, summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.classifier_real_outcomes")
    parser.add_argument("--rebuild", action="store_true", help="answer the questions again")
    print(json.dumps(build(parser.parse_args().rebuild)[1]))
