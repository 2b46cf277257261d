"""Speculative decoding with a draft that always agrees: the upper bound of what drafts can buy,
and what verifying them costs. The drafts are the target's own greedy continuation, read from a
plain run of the same prompts (OracleProposer), so every draft is accepted and proposing costs
next to nothing; what is left is the verification step (k drafts plus one token per sequence
through the target) against the plain decode step, per token produced. Greedy outputs must be
token-identical with and without drafts. `gpu_check --only spec` runs it on a GPU (a random
Llama-3.2-1B); tests run it on CPU with a tiny model, under the CUDA plan's stand-ins too."""
from __future__ import annotations

import time
from typing import Callable

from backends.engine import SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.sequence import Sequence
from backends.engine.speculative.proposers import Draft

# EngineConfig fields to change -> an engine on the target model (one model for every engine built)
Build = Callable[..., LLMEngine]
DRAFT = "always agrees: the target's greedy continuation from a plain run (no draft model, no draft cost)"


class OracleProposer:
    """Proposes what the target decoded greedily from the same prompt in a plain run. The draft-model
    proposer given the target itself would agree too, but it runs k target forwards per step: that
    measures the draft's cost, not the verification's."""

    def __init__(self, num_tokens: int):
        self.num_tokens = num_tokens
        self.continuations: dict[tuple[int, ...], list[int]] = {}  # prompt -> prompt + greedy output
        self.of_seq: dict[int, list[int]] = {}  # looked up once per sequence, not per step

    def learn(self, prompts: list[list[int]], outputs: list[list[int]]) -> None:
        for prompt, output in zip(prompts, outputs):
            self.continuations[tuple(prompt)] = [*prompt, *output]

    def propose(self, seqs: list[Sequence], limits: dict[int, int]) -> dict[int, Draft]:
        drafts = {}
        for seq in seqs:
            known = self.of_seq.get(seq.seq_id)
            if known is None:
                known = self.of_seq[seq.seq_id] = self.continuations.get(tuple(seq.token_ids[:seq.num_prompt_tokens]), [])
            tokens = known[seq.num_tokens:seq.num_tokens + min(self.num_tokens, limits[seq.seq_id])]
            if tokens:
                drafts[seq.seq_id] = Draft(tokens, None)
        return drafts

    def release(self, seq: Sequence) -> None:
        self.of_seq.pop(seq.seq_id, None)


def decode(engine: LLMEngine, prompts: list[list[int]], max_tokens: int, sync: Callable[[], None]) -> tuple[list, dict]:
    """The prompts submitted at once, greedy; once every prefill has given its first token, the
    decode steps to the end are timed. Returns the outputs and {seconds, steps, tokens, ...}."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    seqs = [engine.add_request(prompt, params) for prompt in prompts]
    while engine.has_work() and any(seq.num_output_tokens == 0 for seq in seqs):
        engine.step()
    before = (sum(seq.num_output_tokens for seq in seqs), engine.spec_stats.draft_tokens,
              engine.spec_stats.accepted_tokens)
    sync()
    began, steps = time.perf_counter(), 0
    while engine.has_work():
        engine.step()
        steps += 1
    sync()
    seconds = time.perf_counter() - began
    tokens = sum(seq.num_output_tokens for seq in seqs) - before[0]
    drafted, accepted = engine.spec_stats.draft_tokens - before[1], engine.spec_stats.accepted_tokens - before[2]
    run = {"seconds": round(seconds, 4), "steps": steps, "tokens": tokens, "tokens_per_s": round(tokens / seconds, 2),
           "step_ms": round(seconds / max(steps, 1) * 1000, 3), "tokens_per_step": round(tokens / max(steps, 1), 3)}
    if drafted:
        run.update(drafted=drafted, accepted=accepted, acceptance_rate=round(accepted / drafted, 4))
    return [seq.output_ids for seq in seqs], run


def first_difference(a: list[list[int]], b: list[list[int]]) -> list[int] | None:
    """[request, position] of the first token where two runs' outputs differ, or None."""
    for request, (x, y) in enumerate(zip(a, b, strict=True)):
        for position, (s, t) in enumerate(zip(x, y)):
            if s != t:
                return [request, position]
        if len(x) != len(y):
            return [request, min(len(x), len(y))]
    return None


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def always_agree(build: Build, prompts: list[list[int]], batches: tuple[int, ...], num_tokens: int, max_tokens: int,
                 sync: Callable[[], None] = lambda: None) -> dict:
    """For each batch size B, prompts[:B]: a plain run (warm-up, and the greedy reference the oracle
    learns), a timed plain run, a speculative warm-up run and a timed speculative run, k = num_tokens.
    Per batch: both runs' figures, the acceptance rate, greedy identity (all four runs against the
    reference), time per token with drafts over time per token without, and step time likewise."""
    # no prefix cache: the runs repeat their prompts, and a cached prompt would start decoding (with
    # drafts) in the prefill step, before the timing starts
    plain = build(enable_prefix_caching=False)
    # the config puts the engine on its speculative path (KV lookahead for k drafts, counters for k
    # positions, no async scheduling); the oracle then takes the proposer's place
    speculative = build(enable_prefix_caching=False, speculative="ngram", num_speculative_tokens=num_tokens)
    oracle = speculative.proposer = OracleProposer(num_tokens)
    out: dict = {"draft": DRAFT, "num_speculative_tokens": num_tokens, "max_tokens": max_tokens,
                 "async_scheduling": {"plain": plain.async_scheduling, "speculative": speculative.async_scheduling}}
    for batch in batches:
        chosen = prompts[:batch]
        reference, _ = decode(plain, chosen, max_tokens, sync)
        oracle.learn(chosen, reference)
        outputs, timed_plain = decode(plain, chosen, max_tokens, sync)
        warm, _ = decode(speculative, chosen, max_tokens, sync)
        spec_outputs, timed_spec = decode(speculative, chosen, max_tokens, sync)
        difference = next(filter(None, (first_difference(reference, o) for o in (outputs, warm, spec_outputs))), None)
        out[f"batch_{batch}"] = {
            "plain": timed_plain, "speculative": timed_spec, "acceptance_rate": timed_spec.get("acceptance_rate", 0.0),
            "greedy_identical": difference is None, "first_difference": difference,
            "time_per_token_vs_plain": _ratio(timed_spec["seconds"] / timed_spec["tokens"],
                                              timed_plain["seconds"] / timed_plain["tokens"]),
            "step_time_vs_plain": _ratio(timed_spec["step_ms"], timed_plain["step_ms"])}
    runs = [out[f"batch_{batch}"] for batch in batches]
    out["acceptance_rate"] = min(run["acceptance_rate"] for run in runs)
    out["greedy_identical"] = all(run["greedy_identical"] for run in runs)
    return out
