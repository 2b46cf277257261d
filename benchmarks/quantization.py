"""Weight-only quantization on SmolLM2-135M: memory, speed and quality of fp32, int8, int4.

`python -m benchmarks.quantization [--rounds 2] [--configs fp32,int8,...]` runs each configuration in
its own subprocess (so resident memory is accounted cleanly), one after another, and prints
one JSON object as its last stdout line. Per configuration:

- `rss_delta_mb`: resident memory after loading + quantizing (freed fp32 pages trimmed)
  minus before loading; `weight_mb`: bytes of all distinct parameter/buffer tensors.
- `tokens_per_s`: the engine on 8 concurrent requests x 64 tokens, greedy, EOS ignored
  (same workload for every configuration; best of `--rounds`, as the 2 cores are shared).
- `perplexity`: the HF forward (stock sdpa attention) on the quantized weights over
  PROSE below (~950 tokens of original text written for this benchmark); `prefill_s` is
  that one forward's time (large-M matmuls, where the int kernels are slower than fp32).
- `agreement_*`: greedy engine output vs fp32 on 8 prompts x 32 tokens: `positionwise` is
  the share of positions with the same token; `prefix` counts tokens only up to each
  prompt's first divergence (after a divergence the contexts differ, so later matches
  say little); `teacher_forced` is the share of positions on fp32's greedy path where the
  quantized model's argmax is fp32's token (per-step agreement, free of that compounding).

Configurations `int8` / `int4` (group 32) / `int4_g64` quantize the decoder linears and the
tied LM head (int8 per vocab row, shared with the embedding); `int8_fp32_head` keeps the
head and embedding in fp32. These two comparisons chose the defaults in
backends/engine/quant/quantize.py (group 32, LM head quantized).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from measure.agreement import perplexity, teacher_forced_agreement  # noqa: E402

MODEL = "smollm2-135m"
CONFIGS = {  # name -> (method, int4 group size, quantize the LM head)
    "fp32": (None, 0, False),
    "int8": ("int8", 0, True),
    "int4": ("int4", 32, True),
    "int4_g64": ("int4", 64, True),
    "int8_fp32_head": ("int8", 0, False),
}
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the mountains, there lived an old clockmaker who",
    "The three primary colours are",
    "In machine learning, overfitting means",
    "Q: What is 12 times 12?\nA:",
    "The boiling point of water at sea level is",
    "Dear hiring manager, I am writing to apply for",
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def weight_bytes(model) -> int:
    seen, total = set(), 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            total += tensor.numel() * tensor.element_size()
    return total


def measure(name: str, rounds: int, reference_file: str | None) -> dict:
    """One configuration, in this (fresh) process."""
    import torch
    from transformers import AutoTokenizer

    from backends.engine import EngineConfig, SamplingParams
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.model.model_runner import load_model
    from backends.engine.quant.host_memory import release_freed_memory
    from backends.engine.quant.quantize import quantize_linears
    from backends.engine.model.models import model_dir

    method, group_size, lm_head = CONFIGS[name]
    path = model_dir(MODEL)
    tokenizer = AutoTokenizer.from_pretrained(path)
    release_freed_memory()
    before = _status_kb("VmRSS")
    began = time.perf_counter()
    model = load_model(path)
    counts = quantize_linears(model, method, group_size, lm_head) if method else {}
    release_freed_memory()
    result = {"rss_delta_mb": round((_status_kb("VmRSS") - before) / 1024, 1),
              "weight_mb": round(weight_bytes(model) / 2**20, 1),
              "load_and_quantize_s": round(time.perf_counter() - began, 2), "layers": counts}
    prose = tokenizer.encode(PROSE)
    began = time.perf_counter()
    result["perplexity"] = round(perplexity(model, prose), 3)
    result["prefill_s"] = round(time.perf_counter() - began, 3)  # one forward over the whole text
    result["prefill_tokens"] = len(prose)

    engine = LLMEngine(EngineConfig(model=MODEL, kv_cache_bytes=64 << 20), model=model, tokenizer=tokenizer)
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    result["greedy_tokens"] = engine.generate(prompts, SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))
    if reference_file:
        with open(reference_file) as f:
            reference = json.load(f)
        result["agreement_teacher_forced"] = round(teacher_forced_agreement(model, prompts, reference), 4)
    workload = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        produced = sum(len(out) for out in engine.generate(prompts, workload))
        best = max(best, produced / (time.perf_counter() - start))
    result["tokens_per_s"] = round(best, 2)
    result["threads"] = torch.get_num_threads()
    return result


def agreement(outputs: list[list[int]], reference: list[list[int]]) -> tuple[float, float]:
    total = sum(len(r) for r in reference)
    same = sum(a == b for out, ref in zip(outputs, reference) for a, b in zip(out, ref))
    prefix = 0
    for out, ref in zip(outputs, reference):
        for a, b in zip(out, ref):
            if a != b:
                break
            prefix += 1
    return round(same / total, 4), round(prefix / total, 4)


def run_child(name: str, args, reference_file: str | None) -> dict:
    command = [sys.executable, "-m", "benchmarks.quantization", "--one", name, "--rounds", str(args.rounds)]
    command += ["--reference", reference_file] if reference_file else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        log(done.stderr[-3000:])
        return {"error": f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="throughput repeats per config (best is kept)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    parser.add_argument("--one", choices=sorted(CONFIGS), help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--reference", help=argparse.SUPPRESS)  # child mode: fp32 greedy tokens (JSON file)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.rounds, args.reference)))
        return
    began = time.perf_counter()
    names = ["fp32"] + [n for n in args.configs.split(",") if n != "fp32"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="tiergate-quant-") as scratch:
        reference_file = os.path.join(scratch, "fp32_greedy.json")
        for name in names:
            log(f"measuring {name}")
            results[name] = run_child(name, args, reference_file if name != "fp32" else None)
            if name == "fp32" and "greedy_tokens" in results[name]:
                with open(reference_file, "w") as f:
                    json.dump(results[name]["greedy_tokens"], f)
            log(f"{name}: { {k: v for k, v in results[name].items() if k != 'greedy_tokens'} }")
    reference = results["fp32"].get("greedy_tokens")
    for name, result in results.items():
        tokens = result.pop("greedy_tokens", None)
        if reference and tokens:
            result["agreement_positionwise"], result["agreement_prefix"] = agreement(tokens, reference)
    fp32 = results["fp32"]
    summary = {"model": MODEL, "configs": results}
    for name in names[1:]:
        if "error" not in results[name] and "error" not in fp32:
            summary[f"speedup_{name}"] = round(results[name]["tokens_per_s"] / fp32["tokens_per_s"], 3)
            summary[f"memory_ratio_{name}"] = round(results[name]["weight_mb"] / fp32["weight_mb"], 3)
    summary["notes"] = ("each config in its own subprocess, run sequentially; tokens_per_s = best of rounds of "
                        "8 concurrent x 64 greedy tokens (EOS ignored); agreement vs fp32 over 8 prompts x 32 "
                        "greedy tokens, positionwise, up to the first divergence (prefix) and teacher-forced "
                        "argmax on fp32's greedy path; prefill_s = one HF forward over the perplexity text")
    summary["total_runtime_s"] = round(time.perf_counter() - began, 1)
    print(json.dumps(summary))


PROSE = """\
The harbour town of Kelmouth had never been important, and its people liked it that way. Fishing boats left before \
dawn and came back by the middle of the afternoon, when the light on the water turned the colour of weak tea. The \
market opened when the boats returned, not when the clock said so, and visitors who arrived expecting a timetable \
learned quickly to ask a fisherman's wife instead. She would look at the sky, then at the tide, and give an answer \
that was usually right within a quarter of an hour.

In the spring of the year the new road was built, a surveyor named Ada Brennan came to measure the cliffs. She \
carried a brass instrument in a wooden box, a notebook bound with string, and a pencil she sharpened with a small \
folding knife. Every morning she walked out along the headland, set up her tripod, and wrote down angles and \
distances in neat columns. The children followed her at a distance at first, then closer, and by the end of the \
second week they were holding the measuring chain and arguing about who would read the numbers aloud.

Ada explained her work to anyone who asked. The cliffs, she said, were moving. Not quickly, and not in a way that \
anyone standing on them would notice, but every winter the sea took a little more from the bottom, and every \
summer a little more of the top slid down to replace it. The road engineers wanted to know how far back from the \
edge they should build, and whether the line they had drawn on their map would still be safe in fifty years. To \
answer that, she needed to compare her measurements with old ones, and the old ones were hard to find.

The town library was a single room above the post office, open on Tuesday and Saturday mornings. Its keeper, an \
elderly man called Tomas Reed, had catalogued every book by hand and kept the catalogue in a tin box under his \
desk. When Ada asked about old surveys, he thought for a long time and then led her to a cupboard she had taken for \
a broom closet. Inside, rolled in brown paper and tied with faded ribbon, were maps going back nearly two \
centuries. Some had been drawn by naval officers, some by landowners arguing over boundaries, and one, the oldest, \
by a schoolteacher who had simply wanted her pupils to know the shape of the coast they lived on.

Comparing the maps was slow work. The old surveyors had used different units, different reference points, and \
sometimes different ideas about where north was. Ada spent evenings at the kitchen table of her lodging house, \
converting chains and rods into metres and redrawing each coastline on tracing paper so that she could lay them \
one over another. Gradually a pattern appeared. The headland had lost about a hand's width each year on average, \
but the loss was not steady. There were long quiet stretches and then sudden collapses, usually after a winter \
with more storms than usual.

That pattern mattered more than the average. A road set back by the average loss would be safe for a while and \
then, after one bad winter, suddenly not safe at all. Ada wrote a report recommending that the road be moved \
further inland than the engineers had planned, and that someone measure the cliffs again every five years. The \
engineers grumbled, because the new line meant a longer route and a bridge over a stream they had hoped to avoid. \
In the end they agreed, partly because the report was clear and partly because the schoolteacher's old map showed \
a farmhouse that no longer existed, standing in a field that was now open sea.

The road was finished two summers later. On the day it opened, the town held a small celebration in the market \
square, with music from a borrowed gramophone and more cake than anyone could eat. Ada had already moved on to \
another job further along the coast, but she sent a letter, which Tomas Reed read aloud. She thanked the children \
for their help with the chain and reminded the council that the next measurement was due in five years. Then she \
added a line that people in Kelmouth still quote: the sea is patient, and so should we be.

Years afterwards, when the town had grown a little and the market kept regular hours, the children who had held \
the chain were grown themselves. One of them became the surveyor who took the next measurements, using a newer \
instrument but the same notebook method, and filed the results in the cupboard above the post office beside the \
brown paper rolls. The cliffs had moved again, a little more than the average and a little less than the worst \
case, and the road was still safe.
"""

if __name__ == "__main__":
    main()
