"""Async scheduling (engine/core/llm_engine.py): the next pure decode step is launched from the ids
still on the device before this step's tokens are read. Outputs, finish reasons, failures and
counters must be those of the engine without it; the static-buffer path runs it on CPU."""
from __future__ import annotations

import pytest

from backends import worker
from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.async_engine import AsyncEngine
from backends.engine.core.llm_engine import LLMEngine, StepFailedError
from tests.support.cuda_stand_ins import OutOfMemoryAt
from tests.support.polling import wait_for

from tests.backends.decode_runs import engine, run, workload
from tests.backends.models import bundled, tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama()[0]


def test_it_is_on_only_where_it_can_be_and_refused_by_name_elsewhere(model):
    assert not engine(model).async_scheduling and not engine(model, padded_decode=True).async_scheduling
    assert engine(model, padded_decode=True, async_scheduling=True).async_scheduling
    with pytest.raises(ValueError, match="async_scheduling needs"):
        engine(model, async_scheduling=True)
    with pytest.raises(ValueError, match="async_scheduling and speculative"):
        engine(model, padded_decode=True, async_scheduling=True, speculative="ngram")


def test_the_worker_flag_reaches_the_engine():
    parse = worker.build_parser().parse_args
    assert parse(["--model", "m"]).async_scheduling is None
    assert parse(["--model", "m", "--no-async-scheduling"]).async_scheduling is False
    with pytest.raises(SystemExit) as exited:  # on CPU without --padded-decode: refused by name
        worker.main(["--model", "smollm2-135m", "--device", "cpu", "--async-scheduling"])
    assert str(exited.value.code).startswith("tiergate worker: async_scheduling needs")


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "seeded"])
@pytest.mark.parametrize("num_blocks", [256, 14], ids=["roomy", "preempting"])
def test_outputs_are_token_identical_with_and_without_it(model, temperature, num_blocks):
    """Sequences end mid-batch by max_tokens and by a stop token, two join later, the small pool preempts."""
    plain = run(engine(model, num_blocks=num_blocks), workload(seed=7, temperature=temperature))
    stop_token = plain[0][0][1]  # request 0's second token: even requests stop at it
    work = workload(seed=7, temperature=temperature, stop_token=stop_token)
    expected = run(engine(model, num_blocks=num_blocks), work)
    assert "stop" in expected[1] and "length" in expected[1]
    overlapped = engine(model, num_blocks=num_blocks, padded_decode=True, async_scheduling=True)
    assert run(overlapped, work) == expected
    assert overlapped.num_steps_ahead > 0
    assert overlapped.block_manager.num_free_blocks == overlapped.block_manager.num_blocks


def test_dropped_tokens_are_not_counted(model):
    """A sequence that stops at step N has its step N+1 token dropped: no counter sees it."""
    plain = run(engine(model), workload(seed=3))
    work = workload(seed=3, stop_token=plain[0][0][1])
    work.joins = {0: list(range(len(work.requests)))}  # all at once: the same steps either way
    engines = [engine(model, padded_decode=True, async_scheduling=flag) for flag in (False, True)]
    outputs = [run(e, work) for e in engines]
    assert outputs[0] == outputs[1] and engines[1].num_steps_ahead > 0
    sync, overlapped = engines
    assert overlapped.num_generated_tokens == sum(map(len, outputs[1][0])) == sync.num_generated_tokens
    assert overlapped.num_computed_tokens == sync.num_computed_tokens
    assert overlapped.scheduler.scheduled_tokens == sync.scheduler.scheduled_tokens


def _fail_one_step(model, async_scheduling: bool, failing_call: int):
    e = engine(model, padded_decode=True, async_scheduling=async_scheduling)
    params = SamplingParams(max_tokens=9, temperature=0.0, ignore_eos=True)
    first = [e.add_request(list(range(20 + i, 31 + i)), params) for i in range(3)]
    OutOfMemoryAt(e.runner, {failing_call})
    failures, step = [], 0
    while step <= failing_call or e.has_work():
        step += 1
        if step == failing_call + 1:  # after the failure: served as if nothing happened
            later = e.add_request(list(range(60, 70)), params)
        try:
            e.step()
        except StepFailedError as failed:
            failures.append((step, [first.index(s) for s in failed.seqs]))
    return e, failures, [(s.output_ids, s.finish_reason) for s in first + [later]]


def test_a_step_run_ahead_that_fails_fails_its_own_requests_one_call_later_as_without_it(model):
    sync, expected_failures, expected = _fail_one_step(model, False, failing_call=5)
    overlapped, failures, outputs = _fail_one_step(model, True, failing_call=5)
    assert failures == expected_failures == [(5, [0, 1, 2])]
    assert outputs == expected and outputs[-1][1] == "length" and len(outputs[0][0]) == 4  # steps 1-4
    assert overlapped.num_steps_ahead > 0
    assert overlapped.block_manager.num_free_blocks == overlapped.block_manager.num_blocks


@pytest.fixture
def served():
    """The bundled model behind an AsyncEngine, with async scheduling on and off."""
    model, _, tokenizer = bundled("smollm2-135m")
    engines = {flag: AsyncEngine(LLMEngine(EngineConfig(model="s", num_blocks=256, padded_decode=True,
                                                        async_scheduling=flag), model=model, tokenizer=tokenizer))
               for flag in (False, True)}
    yield engines
    for e in engines.values():
        e.shutdown()


async def _collect(engine: AsyncEngine, prompt: list[int], params: SamplingParams, stop=None, keep: int | None = None):
    text, tokens, last = "", [], None
    stream = engine.generate(prompt, params, stop)
    async for delta in stream:
        text, last = text + delta.text, delta
        tokens += delta.token_ids
        if keep is not None and len(tokens) >= keep:
            await stream.aclose()  # the client goes away: the request is aborted in flight
            break
    return text, tokens, last.finish_reason, last.num_output_tokens


@pytest.mark.slow  # the bundled model, twice
async def test_stop_strings_and_aborts_in_flight_through_the_async_engine(served):
    tokenizer = served[True].tokenizer
    prompt = tokenizer.encode("Count from one to twenty: one, two, three,")
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    full = await _collect(served[False], prompt, params)
    stop = full[0][len(full[0]) // 2:][:4]  # a string from the middle of the answer
    results = {}
    for flag, e in served.items():
        aborted = await _collect(e, prompt, params, keep=3)
        stopped = await _collect(e, prompt, params, stop=[stop])
        results[flag] = (aborted[1], stopped, await _collect(e, prompt, params))
        await wait_for(lambda e=e: not e.core.has_work(), what="the engine idle")
        assert e.core.block_manager.num_free_blocks == e.core.block_manager.num_blocks
    assert results[True] == results[False]
    assert results[True][1][2] == "stop" and len(results[True][1][1]) < params.max_tokens
    assert results[True][2] == full and served[True].core.num_steps_ahead > 0
