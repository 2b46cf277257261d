"""A step that runs out of device memory fails its own requests, with an OpenAI error, and the
engine goes on serving the rest. The out-of-memory is CUDA's alone, so a stand-in wrapped
around the runner's forward raises it; everything else is the real engine and server."""
from __future__ import annotations

import pytest
from aiohttp.test_utils import TestServer

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.async_engine import AsyncEngine
from backends.engine.core.llm_engine import LLMEngine, StepFailedError
from backends.openai_server import WorkerAPI
from tests.support.cuda_stand_ins import OutOfMemoryAt

from tests.backends.models import bundled, tiny_llama


def test_only_the_failed_steps_sequences_end_and_the_rest_finish():
    model, _ = tiny_llama()
    engine = LLMEngine(EngineConfig(model="t", block_size=8, num_blocks=64, max_num_seqs=1), model=model)
    free = engine.block_manager.num_free_blocks
    params = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)
    first, second = engine.add_request(list(range(1, 12)), params), engine.add_request(list(range(20, 30)), params)
    OutOfMemoryAt(engine.runner, {1})
    with pytest.raises(StepFailedError) as failed:
        engine.step()
    assert failed.value.out_of_memory and failed.value.seqs == [first]
    assert first.finish_reason == "error" and "device memory" in str(failed.value)
    while engine.has_work():
        engine.step()
    assert second.finish_reason == "length" and len(second.output_ids) == 5
    assert engine.block_manager.num_free_blocks == free  # the failed sequence's blocks came back


@pytest.fixture
async def served():
    openai = pytest.importorskip("openai", reason="the openai client is a test dependency (docs/gpu.md lists the wheels)")
    model, _, tokenizer = bundled("smollm2-135m")
    engine = LLMEngine(EngineConfig(model="s", num_blocks=256), model=model, tokenizer=tokenizer)
    async_engine = AsyncEngine(engine)
    server = TestServer(WorkerAPI(async_engine, "s").app())
    await server.start_server()
    try:
        yield engine, openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="unused", max_retries=0)
    finally:
        await server.close()
        async_engine.shutdown()


@pytest.mark.slow  # the bundled model behind a real server
async def test_out_of_memory_is_a_503_and_the_worker_keeps_serving(served):
    import openai  # served skipped the test where it is missing

    engine, client = served
    messages = [{"role": "user", "content": "Say hello."}]
    OutOfMemoryAt(engine.runner, {1, 4})  # the first request's prompt step; the streamed one's third step
    with pytest.raises(openai.APIStatusError) as refused:
        await client.chat.completions.create(model="s", messages=messages, max_tokens=8, temperature=0)
    assert refused.value.status_code == 503 and refused.value.body["code"] == "out_of_memory"
    stream = await client.chat.completions.create(model="s", messages=messages, max_tokens=8, temperature=0,
                                                  stream=True, extra_body={"ignore_eos": True})
    with pytest.raises(openai.APIError, match="device memory"):
        async for _ in stream:
            pass
    answer = await client.chat.completions.create(model="s", messages=messages, max_tokens=8, temperature=0)
    assert answer.choices[0].message.content and answer.usage.completion_tokens > 0
