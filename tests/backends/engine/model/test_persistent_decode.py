"""The decode graphs' persistent batch (engine/model/cuda_graphs.py), run on CPU through the same static
buffers: a decode step continuing the last one's batch is advanced in place on the device, from
the sampled ids left there, and gives the same tokens as the plain path."""
from __future__ import annotations

import pytest

from backends.engine import SamplingParams

from tests.backends.decode_runs import engine, run, workload
from tests.backends.models import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama()[0]


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "seeded"])
@pytest.mark.parametrize("num_blocks", [256, 14], ids=["roomy", "preempting"])
def test_continued_steps_give_the_plain_paths_tokens(model, temperature, num_blocks):
    """Block size 4: sequences cross into new blocks every few steps; some end mid-batch, two
    join later, and the small pool preempts."""
    work = workload(seed=5, temperature=temperature)
    expected = run(engine(model, num_blocks=num_blocks), work)
    persistent = engine(model, num_blocks=num_blocks, padded_decode=True)
    assert run(persistent, work) == expected
    graphs = persistent.runner.decode_graphs
    assert graphs.refills[False] > 0 and graphs.refills[True] > 0 and graphs.block_writes > 0
    if num_blocks == 14:
        assert persistent.scheduler.num_preemptions > 0
    assert persistent.block_manager.num_free_blocks == persistent.block_manager.num_blocks


def test_a_continuing_step_builds_nothing_from_the_hosts_lists(model):
    e = engine(model, padded_decode=True)
    seqs = [e.add_request(list(range(10 + i, 17 + 2 * i)), SamplingParams(max_tokens=12, temperature=0.0,
                                                                         ignore_eos=True)) for i in range(3)]
    rebuilt = []
    build = e.runner.step_inputs
    e.runner.step_inputs = lambda *args: rebuilt.append(args) or build(*args)
    e.step()  # the prompts
    e.step()  # first decode: the buffers are filled from the host
    graphs = e.runner.decode_graphs
    assert graphs.refills == {True: 1} and len(rebuilt) == 2
    writes = graphs.block_writes
    blocks = sum(len(s.block_table) for s in seqs)
    for _ in range(8):
        e.step()
    assert len(rebuilt) == 2 and graphs.refills == {True: 1, False: 8}
    # only the blocks the sequences were given since were written, once each
    assert graphs.block_writes - writes == sum(len(s.block_table) for s in seqs) - blocks > 0
    e.complete(seqs[1], "abort")  # the batch changes: the next step refills
    e.step()
    assert len(rebuilt) == 3 and graphs.refills[True] == 2


def test_a_step_through_another_path_leaves_nothing_to_continue(model):
    """A step through another path (a prompt chunk beside the decodes) leaves the buffers stale."""
    e = engine(model, padded_decode=True)
    params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    e.add_request(list(range(30, 40)), params)
    e.step()
    e.step()
    e.step()
    e.add_request(list(range(50, 60)), params)
    e.step()  # the new prompt and the running decode: eager
    assert e.runner.decode_graphs.carried is None and not e.runner.decode_graphs.batch
