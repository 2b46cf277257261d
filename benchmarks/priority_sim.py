"""`python -m benchmarks.priority_sim`: the priority workload replayed through the real
Scheduler on a virtual clock, so scheduling rules and batch concurrencies compare without
machine noise (a shared 2-core machine moves live p99s by 2x from one minute to the next).

A step costs `fixed + per_decode * decodes + per_prefill * prompt tokens` seconds: what one
forward costs on the worker, measured with `--fit` (the real engine, SmolLM2, --threads) or
given with --cost. Interactive chat requests arrive at a steady rate; N batch-priority lanes
each send their next request when the last one ends (as the gateway's dispatcher keeps N in
flight). Prompts are the real chat-templated prompts (so prefix-cache hits are real); every
answer runs to max_tokens. Per N: interactive TTFT p50/p99 (arrival to the end of the step
that makes its first token) beside the batch and alone, and batch tokens/s beside interactive
traffic and alone. The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from backends.engine.core.block_manager import BlockManager
from backends.engine.config import EngineConfig
from backends.engine.core.scheduler import Scheduler
from backends.engine.core.sequence import BATCH, INTERACTIVE, SamplingParams, Sequence
from benchmarks.chat_prompts import CHAT_PROMPTS
from benchmarks.priority_traffic import add_traffic_args
from measure.stats import latency_stats

# Fitted to step timings on the 2-core AMD EPYC, 1 thread (as the local stack runs each worker),
# taken while the machine was otherwise quiet (docs/priorities.md).
DEFAULT_COST = (0.050, 0.0040, 0.00080)
UNIQUE_AT, UNIQUE_IDS = 16, 20000  # where a per-request token goes, and how many distinct ones


def chat_prompts(model: str) -> list[list[int]]:
    from backends.engine.model.models import load_tokenizer, model_dir

    tok = load_tokenizer(model_dir(model))
    return [list(tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                         tokenize=True, return_dict=False)) for p in CHAT_PROMPTS]


def fit_cost(model: str, threads: int, repeats: int = 7) -> tuple[float, float, float]:
    """Time real steps (decodes alone at several widths, and with one prompt beside them),
    take each configuration's median (a busy machine stalls single steps), and fit the
    linear cost by least squares."""
    import numpy as np
    import torch

    from backends.engine.core.llm_engine import LLMEngine

    torch.set_num_threads(threads)
    engine = LLMEngine(EngineConfig(model=model, enable_prefix_caching=False))
    prompts = chat_prompts(model)
    rows, times = [], []
    for width in (1, 4, 8, 16, 32):
        seqs = [engine.add_request(prompts[i], SamplingParams(max_tokens=4000, ignore_eos=True)) for i in range(width)]
        while any(s.num_output_tokens < 8 for s in seqs):
            engine.step()
        for prompt in ([], prompts[-1]):
            samples = []
            for _ in range(repeats):
                if prompt:
                    engine.add_request(prompt, SamplingParams(max_tokens=1))
                started = time.perf_counter()
                engine.step()
                samples.append(time.perf_counter() - started)
            rows.append((1, width, len(prompt)))
            times.append(statistics.median(samples))
        for seq in seqs:
            engine.complete(seq, "abort")
    solution, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(times), rcond=None)
    return tuple(round(float(x), 5) for x in solution)


class Sim:
    def __init__(self, prompts, cost, rate: float, lanes: int, args):
        config = EngineConfig(model="sim", max_num_batched_tokens=args.max_num_batched_tokens,
                              max_num_seqs=args.max_num_seqs, batch_prefill_chunk=args.batch_prefill_chunk or None)
        self.scheduler = Scheduler(config, BlockManager(args.num_blocks, config.block_size), clock=lambda: self.now)
        self.prompts, self.cost, self.args = prompts, cost, args
        self.rate, self.lanes = rate, lanes
        self.now = 0.0
        self.arrival: dict[int, float] = {}
        self.ttfts: list[float] = []
        self.batch_tokens = self.sent = 0

    def _prompt(self, priority: str) -> list[int]:
        """The next chat prompt made unique past its first block (the shared system prompt),
        as real requests are: no prefix-cache hit beyond it. Batch prompts are padded to
        --batch-prompt-tokens to model long documents."""
        prompt = self.prompts[self.sent % len(self.prompts)]
        prompt = prompt[:UNIQUE_AT] + [UNIQUE_IDS + self.sent % UNIQUE_IDS] + prompt[UNIQUE_AT:]
        if priority == BATCH:
            prompt = (prompt * (1 + self.args.batch_prompt_tokens // len(prompt)))[:max(len(prompt),
                                                                                       self.args.batch_prompt_tokens)]
        return prompt

    def _add(self, priority: str, max_tokens: int, at: float) -> None:
        """A request that arrived at `at`; the engine sees it when its current step ends."""
        params = SamplingParams(max_tokens=max_tokens, priority=priority)
        seq = Sequence(self._prompt(priority), params)
        seq.arrival_time = at  # the scheduler's age rule reads the virtual clock
        self.sent += 1
        self.arrival[seq.seq_id] = at
        self.scheduler.add(seq)

    def run(self, duration: float) -> dict:
        self._loop(duration)
        stats = latency_stats(self.ttfts)
        return {"ttft_p50_s": stats["p50"], "ttft_p99_s": stats["p99"], "interactive": len(self.ttfts),
                "batch_tok_s": round(self.batch_tokens / duration, 2)}

    def _loop(self, duration: float) -> None:
        next_user = 0.0 if self.rate else float("inf")
        for _ in range(self.lanes):
            self._add(BATCH, self.args.batch_max_tokens, 0.0)
        while self.now < duration:
            while next_user <= self.now:
                self._add(INTERACTIVE, self.args.max_tokens, next_user)
                next_user += 1 / self.rate
            scheduled = self.scheduler.schedule()
            if not scheduled:
                self.now = next_user
                continue
            decodes = sum(1 for _, n in scheduled if n == 1)
            prefill = sum(n for _, n in scheduled if n > 1)
            self.now += self.cost[0] + self.cost[1] * decodes + self.cost[2] * prefill
            for seq, n in scheduled:
                self._advance(seq, n)

    def _advance(self, seq: Sequence, n: int) -> None:
        seq.num_computed_tokens += n
        self.scheduler.blocks.commit_full_blocks(seq)
        if seq.num_computed_tokens < seq.num_tokens:
            return
        seq.append_token(1000 + seq.num_output_tokens)
        batch = seq.params.priority == BATCH
        if batch and self.now <= self.args.duration:
            self.batch_tokens += 1
        if not batch and seq.num_output_tokens == 1:
            self.ttfts.append(self.now - self.arrival[seq.seq_id])
        if seq.is_finished:
            self.scheduler.release(seq)
            if batch:
                self._add(BATCH, self.args.batch_max_tokens, self.now)  # the lane's next request


def sweep(args, prompts, cost) -> dict:
    alone = Sim(prompts, cost, args.rate, 0, args).run(args.duration)
    table = {0: alone}
    for n in args.concurrency:
        row = Sim(prompts, cost, args.rate, n, args).run(args.duration)
        row["batch_tok_s_alone"] = Sim(prompts, cost, 0, n, args).run(args.duration)["batch_tok_s"]
        row["ttft_p99_ratio"] = round(row["ttft_p99_s"] / alone["ttft_p99_s"], 3)
        row["batch_throughput_ratio"] = round(row["batch_tok_s"] / row["batch_tok_s_alone"], 3)
        row["goals_met"] = row["ttft_p99_ratio"] <= 1.5 and row["batch_throughput_ratio"] >= 0.7
        table[n] = row
        print(json.dumps({"batch_concurrency": n, **row}), flush=True)
    within = [n for n, row in table.items() if row.get("goals_met")]
    return {"by_batch_concurrency": table, "largest_concurrency_meeting_goals": max(within) if within else None}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", help="its tokenizer makes the prompts (and --fit runs it)")
    p.add_argument("--fit", action="store_true", help="measure the step cost on this machine first")
    p.add_argument("--threads", type=int, default=1, help="--fit: torch threads")
    p.add_argument("--cost", type=lambda s: tuple(float(x) for x in s.split(",")), default=DEFAULT_COST,
                   help="fixed,per_decode,per_prefill_token seconds of one step")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8, 12, 16, 24, 32])
    add_traffic_args(p)
    p.add_argument("--batch-prompt-tokens", type=int, default=0, help="pad batch prompts to this length")
    p.add_argument("--batch-prefill-chunk", type=int, default=64, help="the scheduler's cap (0: none)")
    p.add_argument("--duration", type=float, default=600.0, help="virtual seconds per run")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=512)
    p.add_argument("--num-blocks", type=int, default=4096)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    cost = fit_cost(args.model, args.threads) if args.fit else args.cost
    print(f"step cost: {cost[0] * 1000:.1f} ms + {cost[1] * 1000:.2f} ms per decode + "
          f"{cost[2] * 1000:.3f} ms per prompt token", flush=True)
    result = sweep(args, chat_prompts(args.model), cost)
    print(json.dumps({"benchmark": "priority_sim", "cost": cost, "rate_rps": args.rate,
                      "max_tokens": args.max_tokens, "batch_max_tokens": args.batch_max_tokens,
                      "duration_s": args.duration, **result}, separators=(",", ":")))


if __name__ == "__main__":
    main()
