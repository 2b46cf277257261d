"""n copies sharing the prompt's KV, logprobs, penalties and logit_bias in the engine."""
import math

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.async_engine import AsyncEngine
from backends.engine.core.llm_engine import LLMEngine
from backends.serving.sampling import per_choice
from backends.serving.streams import merged, open_streams

from tests.backends.models import bundled, tiny_llama

GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)


def _engine(**overrides):
    model, _ = tiny_llama()
    return LLMEngine(EngineConfig(model="t", block_size=8, num_blocks=256, **overrides), model=model)



def test_logit_bias_and_repetition_penalty_change_greedy_output():
    engine = _engine()
    prompt = list(range(10, 30))
    plain = engine.generate([prompt], GREEDY)[0]
    forced = engine.generate([prompt], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True,
                                                      logit_bias={77: 100.0}))[0]
    assert forced == [77] * 12
    penalised = engine.generate([prompt], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True,
                                                         repetition_penalty=10.0))[0]
    assert len(set(penalised)) == len(penalised)  # nothing seen before is picked again
    assert engine.generate([prompt], GREEDY)[0] == plain  # plain greedy is unaffected by earlier requests


def test_greedy_logprobs_describe_the_chosen_tokens():
    engine = _engine()
    prompt = list(range(40, 60))
    plain = engine.generate([prompt], GREEDY)[0]
    seq = engine.add_request(prompt, SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=3))
    while engine.has_work():
        engine.step()
    assert seq.output_ids == plain  # asking for logprobs does not change the output
    for token, logprob, top in seq.logprobs:
        assert [t for t, _ in top][0] == token and math.isclose(top[0][1], logprob, rel_tol=1e-5)
        assert len(top) == 3 and logprob <= 0 and sum(math.exp(v) for _, v in top) <= 1 + 1e-5
        assert [v for _, v in top] == sorted((v for _, v in top), reverse=True)


async def test_n_copies_reuse_the_prompt_blocks_of_the_first():
    model, _, tokenizer = bundled("smollm2-135m")
    engine = AsyncEngine(LLMEngine(EngineConfig(model="s", block_size=16, num_blocks=256), model=model,
                                   tokenizer=tokenizer))
    prompt = tokenizer.encode("A long shared prompt about tides, moons and harbours. " * 6)
    params = per_choice(SamplingParams(max_tokens=6, temperature=0.8, seed=3), 4)
    assert [p.seed for p in params] == [3, 4, 5, 6]
    try:
        opened = await open_streams(engine, prompt, params, [])
        firsts = [first for first, _ in opened]
        outputs = {}
        async for index, delta in merged(opened):
            outputs.setdefault(index, []).extend(delta.token_ids)
    finally:
        engine.shutdown()
    full_blocks = (len(prompt) - 1) // 16 * 16
    assert firsts[0].num_cached_tokens == 0
    assert [f.num_cached_tokens for f in firsts[1:]] == [full_blocks] * 3  # the prompt was computed once
    assert sorted(outputs) == [0, 1, 2, 3] and all(len(v) == 6 for v in outputs.values())
    blocks = engine.core.block_manager
    assert blocks.num_free_blocks == blocks.num_blocks
