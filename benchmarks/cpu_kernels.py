"""`python -m benchmarks.cpu_kernels [--isas avx2,avx512] [--rows 1,4,16]`: our C++ CPU kernels
(kernels/cpu_kernels.py), each build this CPU runs, on SmolLM2-135M's shapes: the int4 linears
of one decode step (30 layers of merged q/k/v, o, merged gate/up and down projections, group 32),
the int8 LM head (49152 x 576) and the paged decode attention of one step (30 layers, 450
positions a sequence, bf16 pool); with `--dense`, also the same linears as dense fp32 GEMMs on the
weights the tiles hold (what `--int4-dense-prefill` runs for prompt chunks); with `--prompt N`, also
the attention of a fresh N-token prompt chunk (torch's SDPA, kernels/paged_attention.py), 30 layers.
Milliseconds per step, best of `--repeats` (the least disturbed
by other work on a shared machine), on torch's threads or `--threads`; `--clock cpu` counts the
process's CPU time instead of the wall clock, which a loaded machine inflates less (with
`--threads 1`, the kernel's own time). Last line: one JSON object."""
from __future__ import annotations

import argparse
import json
import os
import time

import torch

from kernels import cpu_kernels
from kernels.paged_attention import AttentionMetadata, GatherWorkspace, PrefillChunk, paged_attention
from kernels.quantized_linear import (dequantize_int4_tiles, pack_int4_tiles, quantize_int4, quantize_int8,
                                      scales_and_mins)

LAYERS, HIDDEN, VOCAB, HEADS, KV_HEADS, HEAD_DIM = 30, 576, 49152, 9, 3, 64
# (out, in) of one layer's int4 linears as a compiled step runs them (siblings merged)
LAYER_LINEARS = [(960, 576), (576, 576), (3072, 576), (576, 1536)]
BLOCK, POSITIONS = 16, 450


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter


def best_ms(call, repeats: int) -> float:
    call()  # warm: first-touch of buffers, thread pool
    times = []
    for _ in range(repeats):
        began = clock()
        call()
        times.append(clock() - began)
    return round(min(times) * 1e3, 3)


def int4_step(isa: str, rows: int, tiles: list[torch.Tensor], repeats: int) -> float:
    xs = [torch.randn(rows, tile.shape[1] * 32) for tile in tiles]

    def step():
        for _ in range(LAYERS):
            for x, tile in zip(xs, tiles):
                cpu_kernels.int4_linear(x, tile, 32, isa=isa)
    return best_ms(step, repeats)


def dense_step(rows: int, weights: list[torch.Tensor], repeats: int) -> float:
    xs = [torch.randn(rows, weight.shape[1]) for weight in weights]

    def step():
        for _ in range(LAYERS):
            for x, weight in zip(xs, weights):
                torch.nn.functional.linear(x, weight)
    return best_ms(step, repeats)


def head_step(isa: str, rows: int, codes: torch.Tensor, scales: torch.Tensor, repeats: int) -> float:
    x = torch.randn(rows, HIDDEN)
    return best_ms(lambda: cpu_kernels.int8_linear(x, codes, scales, isa=isa), repeats)


def attention_step(isa: str, batch: int, repeats: int) -> float:
    per_seq = -(-POSITIONS // BLOCK)
    pool = torch.randn(batch * per_seq + 1, BLOCK, KV_HEADS, HEAD_DIM).to(torch.bfloat16)
    v_pool = torch.randn_like(pool, dtype=torch.float32).to(torch.bfloat16)
    tables = torch.randperm(batch * per_seq)[:batch * per_seq].reshape(batch, per_seq)  # blocks scattered
    lens = torch.full((batch,), POSITIONS, dtype=torch.long)
    query = torch.randn(batch, HEADS, HEAD_DIM)

    def step():
        for _ in range(LAYERS):
            cpu_kernels.paged_decode(query, pool, v_pool, tables, lens, HEAD_DIM ** -0.5, None, None, isa=isa)
    return best_ms(step, repeats)


def prompt_attention_step(tokens: int, repeats: int) -> float:
    blocks = -(-tokens // BLOCK)
    k_pool, v_pool = torch.zeros(2, blocks, BLOCK, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    table = torch.randperm(blocks)
    slots = table.repeat_interleave(BLOCK)[:tokens] * BLOCK + torch.arange(tokens) % BLOCK
    query = torch.randn(tokens, HEADS, HEAD_DIM)
    key, value = torch.randn(2, tokens, KV_HEADS, HEAD_DIM)

    def step():  # one step's metadata: its masks are built once and shared by the layers, as in the engine
        meta = AttentionMetadata(slots, [PrefillChunk(0, tokens, tokens, table)], torch.zeros(0, dtype=torch.long),
                                 torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, dtype=torch.long), GatherWorkspace())
        for _ in range(LAYERS):
            paged_attention(query, key, value, k_pool, v_pool, meta, HEAD_DIM ** -0.5)
    return best_ms(step, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--isas", default=",".join(cpu_kernels.runnable_isas()),
                        help="builds to time (default: every one this CPU runs)")
    parser.add_argument("--rows", default="1,4,16", help="rows of x / sequences decoding together")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, help="torch's threads (default: its own choice)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--dense", action="store_true", help="also the linears as dense fp32 GEMMs")
    parser.add_argument("--prompt", type=int, help="also the attention of a fresh prompt chunk of this many tokens")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tiles = [pack_int4_tiles(codes, *scales_and_mins(sz), 32)
             for codes, sz in (quantize_int4(torch.randn(n, k), 32) for n, k in LAYER_LINEARS)]
    codes, scales = quantize_int8(torch.randn(VOCAB, HIDDEN))
    results = {}
    for isa in args.isas.split(","):
        if not cpu_kernels.load(isa):
            raise SystemExit(f"the {isa} build did not load (see the log)")
        for rows in (int(r) for r in args.rows.split(",")):
            results[f"{isa}_rows{rows}"] = {
                "int4_linears_ms": int4_step(isa, rows, tiles, args.repeats),
                "int8_head_ms": head_step(isa, rows, codes, scales, args.repeats),
                "attention_ms": attention_step(isa, rows, args.repeats)}
            if args.dense:
                dense = [dequantize_int4_tiles(tile, 32) for tile in tiles]
                results[f"{isa}_rows{rows}"]["fp32_dense_linears_ms"] = dense_step(rows, dense, args.repeats)
            print(f"{isa} rows {rows}: {results[f'{isa}_rows{rows}']}", flush=True)
    if args.prompt:
        results[f"prompt{args.prompt}_attention_ms"] = prompt_attention_step(args.prompt, args.repeats)
        print(f"prompt attention, {args.prompt} tokens: {results[f'prompt{args.prompt}_attention_ms']}", flush=True)
    print(json.dumps({"results": results, "threads": torch.get_num_threads(), "clock": args.clock,
                      "torch_isa": cpu_kernels.ACTIVE_ISA,
                      "load_average": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
