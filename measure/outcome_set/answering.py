"""Answer outcome-set items with our engine in-process: greedy, each item's own max_tokens, many
sequences at once, the chosen token's logprob and the top-k logprobs of every generated token kept.

Answers go one JSON line per item to `answers-L<level>.jsonl` in the answers folder as they finish,
so a run that stops resumes with the items it has not answered yet."""
from __future__ import annotations

import json
import math
import time
from collections import deque
from pathlib import Path
from typing import Callable

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.device_defaults import plan_defaults

from .checkers import is_correct
from .levels import FEW_SHOT, Level
from .prompts import prompt_ids

TOP_K = 5
DIGITS = 3  # logprobs rounded: the file stays a few MB
FLOOR = -99.0  # a logprob of -inf (a masked token) written as this: JSON has no infinity
BATCH = 48  # sequences in flight at once


def answers_path(folder: Path, level: int) -> Path:
    return Path(folder) / f"answers-L{level}.jsonl"


def read_answers(path: Path) -> dict[str, dict]:
    """Answers already written, by item id; a last line cut short by a stop is ignored."""
    done = {}
    if Path(path).exists():
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[row["id"]] = row
    return done


def load_engine(level: Level) -> LLMEngine:
    """The worker's CPU plan for the level, but decode left eager: compiling costs minutes here, more
    than it saves on short answers whose cost is mostly their prompts."""
    plan = {**plan_defaults("cpu", level.quantization), "compile_decode": False}
    return LLMEngine(EngineConfig(model=level.model, quantization=level.quantization, kv_cache_bytes=256 << 20,
                                  **plan))


def _rounded(value: float) -> float:
    return round(max(FLOOR, value), DIGITS) if not math.isnan(value) else FLOOR


def _finished_text(tokenizer, seq, style: str) -> str:
    text = tokenizer.decode(seq.output_ids, skip_special_tokens=True)
    return text.strip().split("\n")[0].strip() if style == FEW_SHOT else text.strip()


def _ends_line(tokenizer, seq) -> bool:
    """A few-shot answer is its first line: it ends at the first line break after some text."""
    return "\n" in tokenizer.decode(seq.output_ids, skip_special_tokens=True).lstrip()


def record(item: dict, level: Level, text: str, seq) -> dict:
    return {"id": item["id"], "level": level.level, "model": level.model, "text": text,
            "correct": is_correct(item, text), "finish": seq.finish_reason, "tokens": seq.num_output_tokens,
            "logprobs": [_rounded(lp) for _, lp, _ in seq.logprobs],
            "top_logprobs": [[_rounded(v) for _, v in top] for _, _, top in seq.logprobs]}


def answer(engine: LLMEngine, level: Level, items: list[dict], on_answer: Callable[[dict], None],
           batch: int = BATCH, top_k: int = TOP_K) -> None:
    """Answer every item, calling `on_answer(record)` as each one finishes (in finishing order)."""
    tokenizer, pending, running = engine.tokenizer, deque(items), {}
    while pending or running:
        while pending and len(running) < batch:
            item = pending.popleft()
            params = SamplingParams(max_tokens=item["max_tokens"], temperature=0.0, logprobs=top_k)
            seq = engine.add_request(prompt_ids(tokenizer, level.prompt, item), params)
            running[seq.seq_id] = (item, seq)
        engine.step()
        for seq_id, (item, seq) in list(running.items()):
            if not seq.is_finished and level.prompt == FEW_SHOT and _ends_line(tokenizer, seq):
                engine.complete(seq, "stop")
            if seq.is_finished:
                del running[seq_id]
                on_answer(record(item, level, _finished_text(tokenizer, seq, level.prompt), seq))


class Progress:
    """A line every `every` seconds: done/total, rate and the time left."""

    def __init__(self, name: str, total: int, log: Callable[[str], None], every: float = 15.0):
        self.name, self.total, self.log, self.every = name, total, log, every
        self.done, self.started, self.last = 0, time.monotonic(), 0.0

    def tick(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            rate = self.done / max(1e-9, now - self.started)
            left = (self.total - self.done) / rate if rate else float("inf")
            self.log(f"{self.name}: {self.done}/{self.total} answered, {rate:.2f}/s, ETA {left:.0f} s")


def interleaved(items: list[dict]) -> list[dict]:
    """The items in turns over their families (each family's first, then each one's second, ...), so a
    run stopped part way has answered a sample of every family and difficulty, not the first families."""
    turn: dict[str, int] = {}
    keyed = []
    for n, item in enumerate(items):
        turn[item["family"]] = turn.get(item["family"], -1) + 1
        keyed.append((turn[item["family"]], n, item))
    return [item for _, _, item in sorted(keyed, key=lambda k: k[:2])]


def answer_level(level: Level, items: list[dict], folder: Path, log: Callable[[str], None],
                 batch: int = BATCH, engine: LLMEngine | None = None) -> int:
    """Answer the items `folder`'s answers file for the level lacks, in turns over the families;
    returns how many were answered now."""
    path = answers_path(folder, level.level)
    done = read_answers(path)
    todo = interleaved([item for item in items if item["id"] not in done])
    log(f"level {level.level} ({level.model}, {level.quantization or 'fp32'}, {level.prompt}): "
        f"{len(done)} answered before, {len(todo)} to go")
    if not todo:
        return 0
    engine = engine or load_engine(level)
    progress = Progress(f"level {level.level}", len(todo), log)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        def write(row: dict) -> None:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            progress.tick()

        answer(engine, level, todo, write, batch)
    return len(todo)
