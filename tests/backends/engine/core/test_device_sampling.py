"""Sampling stays on the device that holds the logits: no step reads more than token ids back.

On a GPU a read of a tensor's contents is a sync and a copy; a [batch, vocab] read per step
cost more than the model itself (docs/gpu.md, "Sampling on the device"). Two checks that run on CPU:
- the whole sampler (every feature) runs on logits on the meta device, where any read of a
  tensor's contents raises, and gives ids on that device;
- engine steps run under a mode that records every read back to the host, and none of them
  is as wide as the vocabulary.
"""
from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

from backends.engine import EngineConfig, SamplingParams
from backends.engine.structured.grammar import json_schema_grammar
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.sampler import sample_on_device

from tests.backends.models import bundled

pytestmark = pytest.mark.slow  # the bundled model's vocabulary compiles a grammar

SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
# one request of each kind a step may hold
MIXED = [SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True),
         SamplingParams(max_tokens=6, temperature=0.8, top_k=20, ignore_eos=True),
         SamplingParams(max_tokens=6, temperature=0.7, top_p=0.9, seed=11, ignore_eos=True),
         SamplingParams(max_tokens=6, temperature=0.0, repetition_penalty=1.3, presence_penalty=0.5,
                        frequency_penalty=0.2, logit_bias={42: 3.0}, logprobs=3, ignore_eos=True),
         SamplingParams(max_tokens=12, temperature=0.5, seed=3, grammar=json_schema_grammar(SCHEMA),
                        close_in_budget=False)]


@pytest.fixture(scope="module")
def engine():
    model, _, tokenizer = bundled("smollm2-135m")
    return LLMEngine(EngineConfig(model="s", num_blocks=256), model=model, tokenizer=tokenizer)


class HostReads(TorchFunctionMode):
    """Records the shape of every tensor whose contents Python reads (or copies to the CPU)."""
    READS = {"cpu", "tolist", "item", "numpy", "__int__", "__float__", "__bool__", "__index__"}

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        to_host = name == "to" and any(str(a) == "cpu" for a in (*args[1:], kwargs.get("device")))
        if (name in self.READS or to_host) and isinstance(args[0], torch.Tensor):
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **kwargs)


def _sequences(engine, prompt: list[int]):
    return [engine.make_sequence(prompt, params) for params in MIXED]


def test_every_sampling_feature_runs_without_reading_the_device(engine):
    seqs = _sequences(engine, [1, 2, 3, 4])
    for seq in seqs:
        seq.append_token(5)  # an output token for the penalties to count
    vocab = engine.model.config.vocab_size
    logits = torch.empty(len(seqs), vocab, device="meta")
    tokens = sample_on_device(seqs, logits, engine.grammars)
    assert tokens.device.type == "meta" and tokens.shape == (len(seqs),)


def test_engine_steps_read_back_ids_not_logits(engine):
    prompt = engine.tokenizer.encode("Give me a number as JSON.")
    seqs = [engine.add_request(prompt, params) for params in MIXED]
    reads = HostReads()
    with reads:
        while engine.has_work():
            engine.step()
    assert all(seq.is_finished for seq in seqs) and seqs[3].logprobs
    vocab = engine.model.config.vocab_size
    wide = [shape for shape in reads.shapes if any(dim >= vocab for dim in shape)]
    assert reads.shapes and not wide, wide
