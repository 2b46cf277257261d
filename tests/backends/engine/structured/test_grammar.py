"""Grammar-constrained decoding inside the batched engine step, with the real SmolLM2."""
import json

import jsonschema
import pytest

from backends.engine.config import EngineConfig
from backends.engine.structured.grammar import GrammarError, json_schema_grammar
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.sequence import SamplingParams

pytestmark = pytest.mark.slow  # grammars compiled over the bundled model's vocabulary

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "rank", "tags"],
          "properties": {"city": {"type": "string", "maxLength": 12}, "rank": {"type": "integer", "minimum": 1,
                                                                                "maximum": 9},
                         "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["big", "old", "cold"]}}}}


@pytest.fixture(scope="module")
def engine():
    # a small step budget forces chunked prefill; prefix caching is on by default
    return LLMEngine(EngineConfig(model="smollm2-135m", num_blocks=512, block_size=16, max_num_batched_tokens=48))


def _prompt(engine, text):
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                tokenize=True, return_dict=False)


def test_constrained_and_free_sequences_share_steps(engine):
    free_prompt = _prompt(engine, "Write a short poem about the sea.")
    json_prompt = _prompt(engine, "Describe a city as JSON.")
    greedy = SamplingParams(max_tokens=24, temperature=0)
    alone = engine.generate([free_prompt], greedy)[0]
    constrained = [SamplingParams(max_tokens=60, temperature=0.7, seed=i, grammar=json_schema_grammar(SCHEMA))
                   for i in range(3)]
    outputs = engine.generate([free_prompt, json_prompt, json_prompt, json_prompt], [greedy, *constrained])
    assert outputs[0] == alone  # the free greedy sequence is untouched by its constrained neighbours
    for ids in outputs[1:]:
        jsonschema.validate(json.loads(engine.tokenizer.decode(ids, skip_special_tokens=True)), SCHEMA)
    assert engine.block_manager.prefix_hit_tokens > 0  # the repeated JSON prompt came from the prefix cache
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_length_cut_reports_length_and_eos_needs_an_accepting_grammar(engine):
    prompt = _prompt(engine, "Describe a city as JSON.")
    seq = engine.add_request(prompt, SamplingParams(max_tokens=3, temperature=0, grammar=json_schema_grammar(SCHEMA)))
    while engine.has_work():
        engine.step()
    assert seq.finish_reason == "length" and seq.num_output_tokens == 3
    assert seq.output_ids[-1] not in engine.eos_token_ids


def test_uncompilable_schema_is_a_grammar_error(engine):
    with pytest.raises(GrammarError):
        engine.make_sequence([1, 2, 3], SamplingParams(grammar=json_schema_grammar({"$ref": "http://example.com/s"})))


def test_speculation_stays_on_for_free_sequences_and_off_for_constrained(engine):
    spec = LLMEngine(EngineConfig(model="smollm2-135m", num_blocks=512, speculative="ngram"),
                     model=engine.model, tokenizer=engine.tokenizer)
    prompt = _prompt(engine, "Repeat exactly: the cat sat on the mat. the cat sat on the mat.")
    greedy = SamplingParams(max_tokens=20, temperature=0)
    free = spec.generate([prompt], greedy)[0]
    assert free == engine.generate([prompt], greedy)[0] and spec.spec_stats.accepted_tokens > 0
    drafted = spec.spec_stats.draft_tokens
    constrained = spec.generate([_prompt(engine, "Describe a city as JSON.")],
                                SamplingParams(max_tokens=60, temperature=0, grammar=json_schema_grammar(SCHEMA)))[0]
    jsonschema.validate(json.loads(engine.tokenizer.decode(constrained, skip_special_tokens=True)), SCHEMA)
    assert spec.spec_stats.draft_tokens == drafted  # nothing was drafted for the constrained sequence
