"""The decode-graph path (engine/model/cuda_graphs.py) run eagerly on CPU (padded_decode): bucketing, padding, static
buffers and the scratch block, with the torch reference attention. Capture and replay, with
the capture stood in for, are in test_plans.py."""
from __future__ import annotations

import pytest

from backends.engine import EngineConfig, SamplingParams
from backends.engine.model.cuda_graphs import decode_buckets
from backends.engine.core.llm_engine import LLMEngine

from tests.support.prompts import random_prompts

from tests.backends.models import hf_greedy, tiny_llama


def test_buckets_are_powers_of_two_capped_by_the_batch_limit():
    assert decode_buckets(1) == [1]
    assert decode_buckets(64) == [1, 2, 4, 8, 16, 32, 64]
    assert decode_buckets(48) == [1, 2, 4, 8, 16, 32, 48]


@pytest.fixture(scope="module")
def case():
    model, reference = tiny_llama()
    prompts = random_prompts(7, 512, shared_prefix=16, seed=9)
    # different lengths, so the decode batch shrinks 7 -> 1 and crosses every bucket of 8
    params = [SamplingParams(max_tokens=3 + 2 * i, temperature=0.0, ignore_eos=True) for i in range(len(prompts))]
    expected = [hf_greedy(reference, p, sp.max_tokens) for p, sp in zip(prompts, params)]
    return model, prompts, params, expected


def engine(model, padded: bool, **overrides) -> LLMEngine:
    config = EngineConfig(model="test", block_size=4, num_blocks=512, max_num_seqs=8, padded_decode=padded, **overrides)
    return LLMEngine(config, model=model)


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [{}, {"speculative": "ngram"}])
def test_graph_path_is_token_identical_to_eager_and_hf(case, overrides):
    model, prompts, params, expected = case
    eager = engine(model, False, **overrides)
    assert eager.runner.decode_graphs is None
    assert eager.generate(prompts, params) == expected
    graphed = engine(model, True, **overrides)
    assert graphed.generate(prompts, params) == expected
    steps = graphed.runner.decode_graphs.steps
    if not overrides:  # batches of 7, 6, 5, 3 need padding up to 8 and 4
        assert {8, 4, 2, 1} <= set(steps)
    else:  # verification steps carry drafts and run eagerly; the rest still go through the graphs
        assert sum(steps.values()) > 0
    assert graphed.block_manager.num_free_blocks == graphed.block_manager.num_blocks


def test_padded_rows_write_only_the_scratch_block(case):
    model, prompts, _, _ = case
    e = engine(model, True)
    seqs = [e.add_request(p, SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)) for p in prompts[:3]]
    while any(s.num_output_tokens == 0 for s in seqs):  # prefill everything first
        e.step()
    graphs = e.runner.decode_graphs
    assert graphs.scratch_block == e.block_manager.num_blocks  # outside what sequences can be given
    before = [k.clone() for k, _ in e.runner.kv_caches]
    positions = [s.num_tokens - 1 for s in seqs]  # each decode writes its last token's K/V
    e.step()  # 3 decodes in the bucket of 4: one padded row (blocks for them are allocated here)
    real_slots = {s.block_table[p // 4] * 4 + p % 4 for s, p in zip(seqs, positions)}
    assert graphs.steps[4] == 1
    for old, (new, _) in zip(before, e.runner.kv_caches):
        flat_old, flat_new = old.view(-1, *old.shape[2:]), new.view(-1, *new.shape[2:])
        changed = {int(i) for i in (flat_old != flat_new).flatten(1).any(1).nonzero()}  # NaN != NaN counts
        scratch = set(range(graphs.scratch_slot, graphs.scratch_slot + 4))
        assert changed - scratch == real_slots  # every real token written, nothing else outside scratch
        assert changed & scratch  # the padded row wrote there
