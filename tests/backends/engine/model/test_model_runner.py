"""The runner as a GPU worker builds it, run on CPU: the KV pool sized from a memory budget
after a profiling forward, then the decode graphs' static buffers. Only the CUDA memory
queries are stood in for; the profiling forward itself runs during construction, before the
decode paths exist (the order that crashed on the first real GPU)."""
from __future__ import annotations

from backends.engine.config import EngineConfig
from backends.engine.model.model_runner import ModelRunner
from backends.engine.core.sequence import SamplingParams, Sequence
from tests.backends.models import tiny_llama
from tests.support.cuda_stand_ins import cuda_plan_on_cpu

BUDGET = 1 << 20


def test_a_pool_sized_by_a_profiling_forward_then_serves_prompts_and_graph_decodes():
    model, _ = tiny_llama()
    config = EngineConfig(model="tiny", max_num_batched_tokens=64, max_num_seqs=4)
    plan = cuda_plan_on_cpu(config, kv_bytes=BUDGET)  # stands in for torch.cuda's memory queries and capture
    runner = ModelRunner(model, config, max_model_len=256, plan=plan)
    assert plan.kv_budget.profiled == 1 and runner.num_blocks == BUDGET // runner.bytes_per_block()
    assert runner.decode_graphs is not None and len(runner.kv_caches) == runner.num_layers
    seq = Sequence(list(range(1, 20)), SamplingParams())
    seq.block_table = [0, 1]
    logits, rows = runner.forward([(seq, seq.num_tokens)])  # the prompt, eagerly
    assert logits[rows[0]].shape[-1] == model.config.vocab_size
    seq.num_computed_tokens = seq.num_tokens
    seq.append_token(int(logits[rows[0]].argmax()))
    logits, rows = runner.forward([(seq, 1)])  # one decode step: captured, then replayed
    assert logits[rows[0]].shape[-1] == model.config.vocab_size and plan.capture.captures == 1
