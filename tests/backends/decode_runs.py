"""Decode workloads run step by step through an engine, for comparing its decode paths (plain,
persistent batch, async scheduling): requests that join mid-run, sequences ending mid-batch."""
from __future__ import annotations

from dataclasses import dataclass, field

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine

from tests.support.prompts import random_prompts


@dataclass
class Workload:
    requests: list[tuple[list[int], SamplingParams]]
    joins: dict[int, list[int]] = field(default_factory=dict)  # step number -> requests added before it


def workload(seed: int, count: int = 6, temperature: float = 0.0, stop_token: int | None = None) -> Workload:
    """Short prompts, max_tokens from 3 up (sequences end mid-batch), the last two joining later."""
    prompts = random_prompts(count, 512, shared_prefix=6, seed=seed, max_body=14)
    params = [SamplingParams(max_tokens=3 + 3 * i, temperature=temperature, top_k=40 if temperature else 0,
                             seed=100 + i if temperature else None, ignore_eos=True,
                             stop_token_ids=[stop_token] if stop_token is not None and i % 2 == 0 else [])
              for i in range(count)]
    return Workload(list(zip(prompts, params)), {0: list(range(count - 2)), 5: [count - 2], 9: [count - 1]})


def engine(model, block_size: int = 4, num_blocks: int = 256, **settings) -> LLMEngine:
    config = EngineConfig(model="t", block_size=block_size, num_blocks=num_blocks, max_num_seqs=8, **settings)
    return LLMEngine(config, model=model)


def run(engine: LLMEngine, work: Workload) -> tuple[list[list[int]], list[str | None]]:
    """Every request's output ids and finish reason; requests join before the step numbered for them."""
    seqs: dict[int, object] = {}
    step = 0
    while engine.has_work() or any(at >= step for at in work.joins):
        for i in work.joins.get(step, []):
            seqs[i] = engine.add_request(*work.requests[i])
        engine.step()
        step += 1
    ordered = [seqs[i] for i in range(len(work.requests))]
    return [s.output_ids for s in ordered], [s.finish_reason for s in ordered]
