"""Weight-only quantization of a loaded transformers model, once, at load time.

Picking a format per worker: pass `--quantization int8` or `--quantization int4`
(optionally `--quant-group-size 32|64`, default 32) to `python -m backends.worker`, or set
`EngineConfig(quantization="int4", quant_group_size=32)` when building an engine in code.
Without the flag the worker serves the model's fp32 weights. Example, tier 1 of the
default config:

    python -m backends.worker --model smollm2-135m --port 8101 --quantization int4

What is quantized: every nn.Linear inside the decoder layers (attention q/k/v/o and the
MLP). The tied embedding / LM head: by default the LM head is quantized to int8 per vocab
row and the input embedding reads the same int8 rows, so both share one copy (see
`quantize_linears`' `lm_head` argument and benchmarks/quantization.py for the measurement
behind that default). Layers whose shape a kernel cannot take (int4: out_features not a
multiple of 16 or in_features not a multiple of the group size) stay in full precision.

Kernels: on CPU our C++ int4 kernel (int4 layers keep their codes and scales in its tile layout;
aten's int4 kernel where no compiler is at hand) and the int8 kernels of
kernels/quantized_linear.py; on CUDA int4 layers of bf16 models run aten's tinygemm
(kernels/tinygemm_int4.py) on sm80+ where their shape fits it, and every other quantized layer
the Triton GEMM / GEMV of kernels/triton_quantized_matmul.py, fed the same codes, scales and zeros
(int4 repacked along k at load time, so no out_features multiple of 16 is needed there) with
activations in the model's dtype. quant_kernels.py decides, per layer; `quantize_linears(kernel=...)`
picks one explicitly (tests run the Triton one on CPU in Triton's interpreter).

int4 from the GGUF's own blocks: when the model folder has the Q4_1 blocks that `prepare`
kept (backends/engine/quant/gguf_blocks.py; SmolLM2), int4 with group 32 serves exactly those codes,
scale d and zero m + 8d per block (the scale and zero in bf16, the kernel's activation
dtype), with no second rounding of the weights. Layers the GGUF does not ship as Q4_1 (the
Q8_0 embedding, hence the tied LM head) then stay in the folder's fp32, as the GGUF has
them. Without blocks (tiny test models, Gemma 3's Q4_K GGUF) linears are quantized from
their fp32 weights as below. AWQ and GPTQ int4 folders come with their own int4 layers
(backends/engine/quant/int4_checkpoints.py), which quantize_model keeps.

Why: int4 groups of 32 by default, because SmolLM2's weights already lie on a 4-bit grid per
32; the tied LM head in int8, because that drops its fp32 table for a small quality cost;
--int4-dense-prefill exists because aten's int kernels lose to a dense GEMM on prompt chunks.
The measurements behind each are in docs/quantization.md.
"""
from __future__ import annotations

import logging

import torch
from torch import nn

from backends.engine.quant.host_memory import release_freed_memory
from backends.engine.quant.gguf_blocks import load_q4_1
from backends.engine.quant.quant_kernels import (CPU_KERNELS, KERNEL_GROUPS, KERNELS, Kernel, cpu_kernel,  # noqa: F401
                                           default_kernel, int4_kernel, int8_kernel)
from backends.engine.quant.int4_kernels import Int4RowKernels, RowTable, layer_table
from kernels import cpu_kernels
from kernels.int4_dequant import pack_int4_along_k
from kernels.quantized_linear import (ACT_DTYPE, INT4_N_MULTIPLE, INT4_TILE_ROWS, Q4_1_GROUP, dequantize_int4_tiles,
                                      int4_linear, int4_tile_linear, int8_linear, pack_int4, pack_int4_tiles,
                                      quantize_int4, quantize_int8, scales_and_mins, scales_and_zeros_of,
                                      split_q4_1)

log = logging.getLogger("tiergate.quantize")
METHODS = ("int8", "int4")
GROUP_SIZES = (32, 64)


DENSE_MIN_ROWS = 16  # int4 layers with a dense copy (attach_dense_prefill) use it from this many rows


def _triton():
    """Imported on first use: a CPU worker never loads triton."""
    from kernels import triton_quantized_matmul

    return triton_quantized_matmul


class Int8Linear(nn.Module):
    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None, kernel: Kernel = Kernel.ATEN):
        super().__init__()
        self.out_features, self.in_features = codes.shape
        self.kernel = int8_kernel(Kernel(kernel))
        self.register_buffer("codes", codes)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)
        self.register_buffer("dense_codes", None, persistent=False)  # bf16 codes (attach_dense_head), if attached

    @classmethod
    def from_linear(cls, linear: nn.Linear, kernel: Kernel = Kernel.ATEN) -> "Int8Linear":
        return cls(*quantize_int8(linear.weight), _bias(linear), kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == Kernel.TRITON:
            return _triton().triton_int8_linear(x, self.codes, self.scales, self.bias)
        return int8_linear(x, self.codes, self.scales, self.bias)

    def dense_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The int8 kernel's product (bf16 activations times the codes, then the row scales) as
        a dense bf16 GEMM: codes up to 127 are exact in bf16. Faster than the kernel for prompt
        chunks, slower for a row or two (docs/quantization.md)."""
        out = (nn.functional.linear(x.to(ACT_DTYPE), self.dense_codes) * self.scales).to(x.dtype)
        return out if self.bias is None else out + self.bias


class Int4Linear(nn.Module):
    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int,
                 bias: torch.Tensor | None, kernel: Kernel | None = None, table: RowTable | None = None):
        """codes int [n, k] in 0..15 with w = q * scale + min, scales and mins fp32 [n, k / group],
        packed here in the layout `kernel` reads (None: int4_kernel's pick for bf16 activations). Our tiles keep scale and min
        in fp16, a Q4_1 block's own d and m, so scales_and_zeros is then None; aten's, tinygemm's and
        Triton's kernels take bf16 (scale, zero) pairs [k / group, n, 2] with zero = min + 8 * scale.
        A tinygemm layer (CUDA, bf16) runs the kernel its row table (`table`, default
        int4_kernels.active_table()) picks for each call's row count, in `rows`."""
        super().__init__()
        kernel = kernel or int4_kernel(codes.device, codes.shape[1], codes.shape[0], group_size)
        (self.out_features, self.in_features), self.group_size, self.kernel = codes.shape, group_size, kernel
        self.rows = None
        if kernel == Kernel.TINYGEMM:  # rows holds the codes, in the forms its kernels read
            self.rows = Int4RowKernels(codes, scales, mins, group_size,
                                       layer_table(*codes.shape, group_size, table=table, device=codes.device))
            packed = scales_and_zeros = None
        elif kernel == Kernel.CPP:
            packed, scales_and_zeros = pack_int4_tiles(codes, scales, mins, group_size), None
        else:
            packed = pack_int4_along_k(codes) if kernel == Kernel.TRITON else pack_int4(codes)
            scales_and_zeros = scales_and_zeros_of(scales, mins)
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.register_buffer("bias", bias)
        self.register_buffer("dense", None, persistent=False)  # dense copy for prompt chunks, if attached
        self.fused: tuple[FusedInt4, int, int] | None = None  # (group, first row, end row), if fused with siblings

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int, kernel: Kernel | None = None) -> "Int4Linear":
        codes, scales_and_zeros = quantize_int4(linear.weight, group_size)
        kernel = kernel or layer_int4_kernel(linear, group_size, None)
        return cls(codes, *scales_and_mins(scales_and_zeros), group_size, _bias(linear), kernel)

    @classmethod
    def from_q4_1(cls, linear: nn.Linear, blocks: torch.Tensor, kernel: Kernel | None = None) -> "Int4Linear":
        """The layer's GGUF Q4_1 blocks as they are (codes, d and m unchanged), in place of its weight."""
        codes, d, m = split_q4_1(blocks)
        if codes.shape != linear.weight.shape:
            raise ValueError(f"Q4_1 blocks of shape {tuple(codes.shape)} do not fit a {tuple(linear.weight.shape)} layer")
        device = linear.weight.device
        return cls(codes.to(device), d.to(device), m.to(device), Q4_1_GROUP, _bias(linear), kernel)

    @classmethod
    def from_codes(cls, linear: nn.Linear, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor,
                   group_size: int, kernel: Kernel | None = None, bias: torch.Tensor | None = None,
                   table: RowTable | None = None) -> "Int4Linear":
        """Given codes [n, k], scales and mins [n, k / group] (on the target device) in place of
        `linear`, a meta or real nn.Linear of which only the shape, dtype and bias are read. `bias`
        (a checkpoint's own) replaces the linear's; `kernel` as layer_int4_kernel's `asked`; `table` as __init__'s."""
        if codes.shape != (linear.out_features, linear.in_features):
            raise ValueError(f"codes of shape {tuple(codes.shape)} do not fit a "
                             f"[{linear.out_features}, {linear.in_features}] layer")
        if bias is not None:
            bias = bias.detach().float().to(codes.device)
        elif linear.bias is not None:  # a meta bias has no values: zeros, as a random model's biases
            bias = torch.zeros(linear.out_features, device=codes.device) if linear.bias.is_meta \
                else linear.bias.detach().float().to(codes.device)
        return cls(codes, scales, mins, group_size, bias, layer_int4_kernel(linear, group_size, kernel, codes.device),
                   table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == Kernel.TRITON:
            return _triton().triton_int4_linear(x, self.packed, self.scales_and_zeros, self.group_size, self.bias)
        if self.rows is not None:
            out = self.rows(x)
            return out if self.bias is None else out.add_(self.bias)  # in place: keeps the activations' dtype
        if self.fused is not None and torch.compiler.is_compiling():
            # every sibling asks for the same whole-group product: the graph's common-subexpression
            # pass keeps one call, and each sibling takes its slice of the columns
            group, start, stop = self.fused
            out = self.matmul(x, group.packed, group.scales_and_zeros)[..., start:stop]
            return out if self.bias is None else out + self.bias
        # compiled decode steps stay on int4, and test no row count (that would guard the batch size)
        if self.dense is not None and not torch.compiler.is_compiling() \
                and x.numel() >= DENSE_MIN_ROWS * self.in_features:
            out = nn.functional.linear(x.to(self.dense.dtype), self.dense).to(x.dtype)
            return out if self.bias is None else out + self.bias
        out = self.matmul(x)
        return out if self.bias is None else out + self.bias

    def matmul(self, x: torch.Tensor, packed: torch.Tensor | None = None,
               scales_and_zeros: torch.Tensor | None = None) -> torch.Tensor:
        """x times the int4 weights (this layer's, or those given) through the CPU kernel, no bias."""
        packed = self.packed if packed is None else packed
        if self.kernel == Kernel.CPP:
            return int4_tile_linear(x, packed, self.group_size)
        scales_and_zeros = self.scales_and_zeros if scales_and_zeros is None else scales_and_zeros
        return int4_linear(x, packed, scales_and_zeros, self.group_size)

    def dequantized(self) -> torch.Tensor:
        """The fp32 weights [n, k] the CPU kernel multiplies by."""
        if self.kernel == Kernel.CPP:
            return dequantize_int4_tiles(self.packed, self.group_size)
        eye = torch.eye(self.in_features, dtype=ACT_DTYPE)  # aten's own dequantisation, rounded to bf16
        return torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.packed, self.group_size,
                                                          self.scales_and_zeros).t().float()


class FusedInt4:
    """The packed codes and scales of sibling int4 layers stacked along out_features. Our tiles
    and aten's packing both keep whole blocks of rows apart, so stacking packed layers is packing
    the stacked codes when each layer fills whole blocks (fuse_sibling_projections checks)."""

    def __init__(self, layers: list[Int4Linear]):
        self.packed = torch.cat([layer.packed for layer in layers])
        self.scales_and_zeros = None if layers[0].scales_and_zeros is None else \
            torch.cat([layer.scales_and_zeros for layer in layers], dim=1)


# projections that transformers' decoders apply to one and the same input
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
# output rows per packed block: a tile of ours holds 4 rows; aten packs CPU int4 codes in blocks
# of 64 output rows on AVX-512 (32 on AVX2) and a partial block differently
FUSE_ROW_MULTIPLE = {Kernel.CPP: INT4_TILE_ROWS, Kernel.ATEN: 64}


def fuse_sibling_projections(model: nn.Module) -> int:
    """Inside a compiled graph, sibling int4 layers (q/k/v, gate/up) run as one matmul over
    their stacked weights: at batch 1 each kernel call carries a fixed cost beside its bytes,
    and 7 calls per layer become 4 (q/k/v, o, gate/up, down). Eager calls keep one matmul per
    layer, on a view of the stacked codes (no second copy). Returns the number of groups."""
    groups = 0
    for parent in model.modules():
        for names in SIBLINGS:
            layers = [getattr(parent, name, None) for name in names]
            if not all(isinstance(layer, Int4Linear) and layer.kernel in CPU_KERNELS for layer in layers) or \
                    len({(layer.in_features, layer.group_size, layer.kernel) for layer in layers}) > 1 or \
                    any(layer.out_features % FUSE_ROW_MULTIPLE[layer.kernel] for layer in layers):
                continue
            group, start = FusedInt4(layers), 0
            rows_per_entry = INT4_TILE_ROWS if layers[0].kernel == Kernel.CPP else 1  # rows per index of packed
            for layer in layers:
                stop = start + layer.out_features
                layer.packed = group.packed[start // rows_per_entry:stop // rows_per_entry]
                layer.fused = (group, start, stop)
                start = stop
            groups += 1
    return groups


class Int8Embedding(nn.Module):
    """Token embedding that reads the int8 rows of a tied, quantized LM head."""

    def __init__(self, head: Int8Linear, dtype: torch.dtype):
        super().__init__()
        self.head = [head]  # a list, so the head's buffers are not registered twice
        self.dtype = dtype

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        head = self.head[0]
        return head.codes[input_ids].to(self.dtype) * head.scales[input_ids, None].to(self.dtype)


def _bias(linear: nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach().float().clone()


def layer_int4_kernel(linear: nn.Linear, group_size: int, asked: Kernel | None = None,
                      device: torch.device | None = None) -> Kernel:
    """int4_kernel for `linear`'s shape and dtype, on `device` (a meta linear's target), else its own."""
    return int4_kernel(device or linear.weight.device, linear.in_features, linear.out_features, group_size,
                       linear.weight.dtype, asked)


def _can_quantize(linear: nn.Linear, group_size: int, kernel: Kernel) -> bool:
    """int4 only (int8 takes every layer)."""
    n_ok = kernel not in CPU_KERNELS or linear.out_features % INT4_N_MULTIPLE == 0  # the CPU packers need n % 16
    return n_ok and linear.in_features % group_size == 0


def quantize_linears(model: nn.Module, method: str, group_size: int = 32, lm_head: bool = True,
                     gguf_blocks: dict[str, torch.Tensor] | None = None, kernel: Kernel | None = None) -> dict:
    """Replace the decoder's nn.Linear layers in place; returns counts for logs and tests.
    With `gguf_blocks` (int4, group 32), layers with blocks take them as they are and all
    other layers, the LM head included, stay unquantized. `kernel`: see KERNELS; None picks
    by the model's device (default_kernel), and for each int4 layer by its shape (int4_kernel)."""
    if method not in METHODS:
        raise ValueError(f"quantization must be one of {METHODS}, got {method!r}")
    if method == "int4" and group_size not in GROUP_SIZES:
        raise ValueError(f"quant_group_size must be one of {GROUP_SIZES}, got {group_size}")
    if kernel is not None and kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    asked = None if kernel is None else Kernel(kernel)
    family = asked or default_kernel(model)
    if gguf_blocks and (method, group_size) != ("int4", Q4_1_GROUP):
        raise ValueError("GGUF Q4_1 blocks serve int4 with group size 32 only")
    head = model.get_output_embeddings()
    counts = {"quantized": 0, "kept": 0, "lm_head": False, "from_gguf": 0}
    with torch.no_grad():
        for parent_name, parent in list(model.named_modules()):
            for name, child in list(parent.named_children()):
                if not isinstance(child, nn.Linear) or child is head:
                    continue
                blocks = (gguf_blocks or {}).get(f"{parent_name}.{name}" if parent_name else name)
                layer_kernel = int8_kernel(family) if method == "int8" and blocks is None else \
                    layer_int4_kernel(child, group_size, asked)
                if blocks is not None:
                    replacement = Int4Linear.from_q4_1(child, blocks, layer_kernel)
                    counts["from_gguf"] += 1
                elif gguf_blocks or (method == "int4" and not _can_quantize(child, group_size, layer_kernel)):
                    counts["kept"] += 1
                    continue
                else:
                    replacement = Int8Linear.from_linear(child, layer_kernel) if method == "int8" else \
                        Int4Linear.from_linear(child, group_size, layer_kernel)
                setattr(parent, name, replacement)
                counts["quantized"] += 1
        if lm_head and isinstance(head, nn.Linear):  # not yet quantized
            # from the GGUF, the input embedding keeps the exact Q8_0 values; only the head's matmul
            # (the largest one of a decode step) reads int8 rows
            counts["lm_head"] = _quantize_head(model, head, int8_kernel(family), share_with_embedding=not gguf_blocks)
    return counts


def _quantize_head(model: nn.Module, head: nn.Linear, kernel: Kernel, share_with_embedding: bool = True) -> bool:
    """int8 per vocab row; when the embedding is a plain nn.Embedding tied to the head it
    reads the same int8 rows (if `share_with_embedding`), so the fp32 table is dropped.
    Otherwise (e.g. Gemma's scaled embedding) quantizing the head would add a copy beside the
    fp32 table, so skip it."""
    embedding = model.get_input_embeddings()
    tied = share_with_embedding and embedding is not None and embedding.weight.data_ptr() == head.weight.data_ptr()
    if tied and type(embedding) is not nn.Embedding:
        return False
    dtype = head.weight.dtype
    quantized = Int8Linear.from_linear(head, kernel)
    model.set_output_embeddings(quantized)
    if tied:
        model.set_input_embeddings(Int8Embedding(quantized, dtype))
    return True


def dense_prefill_dtype() -> torch.dtype:
    """bf16 where the CPU multiplies bf16 natively (AVX-512 BF16 or AMX), fp32 elsewhere: emulated
    bf16 is slower than fp32 and than the int4 kernel itself (docs/quantization.md). Torch's vector
    unit lowered to AVX2 (ATEN_CPU_CAPABILITY=avx2) counts as a CPU without them."""
    native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return ACT_DTYPE if native and cpu_kernels.ACTIVE_ISA == "avx512" else torch.float32


def attach_dense_prefill(model: nn.Module) -> int:
    """Give each CPU int4 layer a dense copy of its weights (dense_prefill_dtype) for inputs of
    DENSE_MIN_ROWS rows or more (prompt chunks): there a dense GEMM beats the int4 kernel; at one
    row int4 wins, reading a quarter of the bytes (docs/quantization.md). The copy holds the weights the int4 kernel multiplies by
    (Int4Linear.dequantized), in the dense dtype. It costs 2 (bf16) or 4 (fp32) bytes per weight
    beside the 0.5 of int4."""
    layers = [m for m in model.modules() if isinstance(m, Int4Linear) and m.kernel in CPU_KERNELS]
    dtype = dense_prefill_dtype()
    with torch.no_grad():
        for layer in layers:
            layer.dense = layer.dequantized().to(dtype).contiguous()
    return len(layers)


# causal LMs whose logits are their head's product and nothing more (Gemma's head stays
# unquantized beside its scaled embedding, and it softcaps the logits)
PLAIN_HEAD_MODELS = ("llama", "qwen2", "qwen3")


def attach_dense_head(model: nn.Module) -> bool:
    """A bf16 copy of an int8 LM head's codes, for compiled decode steps of 2 or more rows
    (CompiledDecode), where native bf16 GEMMs make it the faster path: 2 bytes per head weight."""
    head = model.get_output_embeddings()
    if not isinstance(head, Int8Linear) or head.kernel not in CPU_KERNELS or dense_prefill_dtype() != ACT_DTYPE \
            or getattr(model.config, "model_type", None) not in PLAIN_HEAD_MODELS:
        return False
    head.dense_codes = head.codes.to(ACT_DTYPE)
    return True


def quantize_model(model: nn.Module, config, from_checkpoint: int) -> dict:
    """Quantize `model` in place as `config` (an EngineConfig) says; no-op without quantization.
    `from_checkpoint`: the int4 layers a model from an AWQ / GPTQ folder came with
    (int4_checkpoints.checkpoint_int4_layers), which it keeps as they are."""
    if not config.quantization and not from_checkpoint:
        return {"quantized": 0, "kept": 0, "lm_head": False}
    if from_checkpoint:  # its own codes and group size; the head stays as the checkpoint has it
        counts = {"quantized": 0, "kept": 0, "lm_head": False, "from_gguf": 0, "from_checkpoint": from_checkpoint}
    else:
        blocks = {}
        if (config.quantization, config.quant_group_size) == ("int4", Q4_1_GROUP):
            blocks = load_q4_1(getattr(model, "name_or_path", None))  # the folder the weights came from
        counts = quantize_linears(model, config.quantization, config.quant_group_size, gguf_blocks=blocks)
    if config.int4_dense_prefill:
        counts["dense_prefill"] = attach_dense_prefill(model)
        counts["dense_head"] = config.compile_decode and attach_dense_head(model)
    if config.compile_decode:
        counts["fused_groups"] = fuse_sibling_projections(model)
    release_freed_memory()
    if from_checkpoint:
        return counts  # load_int4_checkpoint logged its layers
    log.info("weight-only %s (group %d): %d linear layers quantized (%d from the GGUF's Q4_1 blocks), %d kept, "
             "LM head quantized: %s", config.quantization, config.quant_group_size, counts["quantized"],
             counts["from_gguf"], counts["kept"], counts["lm_head"])
    return counts
