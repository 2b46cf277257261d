"""Engine settings, each with the reason for its default."""
from __future__ import annotations

from dataclasses import dataclass

from .device_defaults import defaults_for


@dataclass
class EngineConfig:
    model: str  # bundled model name or a prepared model folder
    block_size: int = 16  # tokens per KV block; also the prefix-cache granularity
    kv_cache_bytes: int = 1 << 30  # memory budget for the KV pool; sets the number of blocks
    num_blocks: int | None = None  # overrides kv_cache_bytes (tests force preemption with it)
    max_num_batched_tokens: int | None = None  # token budget of one step (decodes + prefill chunks); None: by device (device_defaults.py)
    max_num_seqs: int | None = None  # running sequences at most; None: by device (device_defaults.py)
    max_waiting: int = 256  # waiting queue bound: beyond it new requests are refused (503)
    batch_max_wait_s: float = 30.0  # a batch request waiting this long is admitted like an interactive one
    batch_prefill_chunk: int | None = 64  # batch prompt tokens per step while interactive work runs (None: no cap)
    max_model_len: int | None = None  # context window; default min(model's, 8192)
    enable_prefix_caching: bool = True
    dtype: str | None = None  # None: float32 on CPU, bfloat16 on CUDA (device_defaults.py)
    kv_cache_dtype: str | None = None  # None/"auto": the model's; "bfloat16" on CPU: half the KV bytes (device.py)
    device: str = "cpu"  # "auto" | "cpu" | "cuda", "auto" resolved here, once; the worker's --device defaults to auto
    gpu_memory_utilization: float | None = 0.9  # CUDA: share of the GPU for weights + KV pool (None: use kv_cache_bytes)
    cuda_graphs: bool | None = None  # CUDA: decode steps replay captured graphs; None: on for CUDA (engine/model/cuda_graphs.py)
    # CPU: pure decode steps run the decode graphs' static, padded buffers eagerly (nothing captured),
    # so that path runs without a GPU; slower than compile_decode (engine/model/cuda_graphs.py)
    padded_decode: bool = False
    fuse_kernels: bool | None = None  # fused norm/rotary/SiLU kernels, merged projections; None: on for CUDA, off for CPU (engine/model/fusion.py)
    # launch the next decode step before this one's tokens are read (engine/core/llm_engine.py); None: on
    # where decode graphs are captured (CUDA), off elsewhere; True on CPU needs padded_decode=True
    async_scheduling: bool | None = None
    compile_decode: bool = False  # CPU: decode steps run one whole-model torch.compile graph (engine/model/compiled_decode.py)
    seed: int = 0  # engine-wide generator for unseeded sampling
    quantization: str | None = None  # None | "int8" | "int4": weight-only, see engine/quant/quantize.py
    int4_dense_prefill: bool = False  # CPU int4: dense weight copies for prompt chunks (and batched heads: engine/quant/quantize.py)
    quant_group_size: int = 32  # int4 group size (32 or 64); 32 is the bundled GGUFs' own grid (docs/quantization.md)
    speculative: str | None = None  # None | "ngram" (prompt lookup) | "draft" (draft_model)
    num_speculative_tokens: int = 4  # draft tokens proposed per sequence per step
    draft_model: str | None = None  # bundled name or folder; must share the target's tokenizer

    def __post_init__(self):
        # refused here, before any weights load; on CUDA the plan refuses compile_decode alone
        paths = [name for name in ("compile_decode", "cuda_graphs", "padded_decode") if getattr(self, name)]
        if len(paths) > 1:
            raise ValueError(f"{' and '.join(paths)} are different decode paths: choose one")
        if self.device == "auto":
            from .model.device import resolve_device  # torch only to resolve "auto": the settings need none

            self.device = resolve_device(self.device).type
        if self.cuda_graphs and self.device != "cuda":
            raise ValueError("cuda_graphs (--cuda-graphs) captures decode steps on a CUDA device; on the CPU, "
                             "padded_decode (--padded-decode) runs the same padded decode buffers eagerly")
        defaults = defaults_for(self.device)
        if self.max_num_batched_tokens is None:
            self.max_num_batched_tokens = defaults.max_num_batched_tokens
        if self.max_num_seqs is None:
            self.max_num_seqs = defaults.max_num_seqs
