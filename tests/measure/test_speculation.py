"""gpu_check's spec step (measure/speculation.py) on CPU with a tiny model: the draft that always
agrees is always accepted, greedy outputs are token-identical with and without it, and each
verification step yields k + 1 tokens per sequence. Under the CPU plan, and under the CUDA plan
with its CUDA calls stood in for (tests/support/cuda_stand_ins.py), where the plain engine
schedules ahead as it does on a GPU and the speculative one cannot."""
from __future__ import annotations

import pytest

from backends.engine import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.sequence import Sequence
from backends.engine import SamplingParams
from measure.speculation import OracleProposer, always_agree, first_difference
from tests.backends.models import tiny_llama
from tests.support.cuda_stand_ins import cuda_plan_on_cpu
from tests.support.prompts import random_prompts

K, MAX_TOKENS = 4, 11  # two verification steps of K + 1 tokens after the prefill's


@pytest.fixture(scope="module")
def model():
    return tiny_llama()[0]


@pytest.mark.parametrize("cuda_plan", [False, True], ids=["cpu-plan", "cuda-plan-stand-ins"])
def test_a_draft_that_always_agrees_is_always_accepted_and_changes_no_token(model, cuda_plan):
    def build(**changes) -> LLMEngine:
        config = EngineConfig(model="tiny", block_size=8, num_blocks=256, max_num_seqs=16, **changes)
        return LLMEngine(config, model=model, plan=cuda_plan_on_cpu(config) if cuda_plan else None)

    prompts = random_prompts(16, 512, shared_prefix=0, seed=3, max_body=24)
    out = always_agree(build, prompts, (1, 16), K, MAX_TOKENS)
    assert out["async_scheduling"] == {"plain": cuda_plan, "speculative": False}
    assert out["acceptance_rate"] == 1.0 and out["greedy_identical"] is True
    for batch in (1, 16):
        run = out[f"batch_{batch}"]
        plain, spec = run["plain"], run["speculative"]
        assert run["first_difference"] is None and spec["acceptance_rate"] == 1.0
        # after the prefill's token, MAX_TOKENS - 1 each: one per plain step, K + 1 per verification
        assert plain["tokens"] == spec["tokens"] == batch * (MAX_TOKENS - 1)
        assert plain["steps"] == MAX_TOKENS - 1
        assert spec["steps"] == -(-(MAX_TOKENS - 1) // (K + 1)) and spec["drafted"] == spec["accepted"]
        assert run["time_per_token_vs_plain"] > 0 and run["step_time_vs_plain"] > 0


def test_the_oracle_proposes_the_known_continuation_within_the_limit_and_nothing_for_an_unknown_prompt():
    oracle = OracleProposer(3)
    oracle.learn([[1, 2]], [[7, 8, 9, 10]])
    params = SamplingParams(max_tokens=8, temperature=0.0)
    known, unknown = Sequence([1, 2], params), Sequence([5, 6], params)
    known.token_ids.append(7)  # the first token decoded
    drafts = oracle.propose([known, unknown], {known.seq_id: 2, unknown.seq_id: 3})
    assert list(drafts) == [known.seq_id] and drafts[known.seq_id].tokens == [8, 9]
    assert drafts[known.seq_id].probs is None  # a point mass, as n-gram drafts are
    oracle.release(known)
    assert oracle.of_seq == {unknown.seq_id: []}


def test_first_difference_names_the_request_and_position():
    assert first_difference([[1, 2], [3, 4]], [[1, 2], [3, 4]]) is None
    assert first_difference([[1, 2], [3, 4]], [[1, 2], [3, 5]]) == [1, 1]
    assert first_difference([[1, 2]], [[1]]) == [0, 1]
