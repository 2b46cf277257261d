"""`python -m backends.prepare [NAME...]`: convert the bundled GGUF models once into
safetensors folders, and keep the GGUF's own Q4_1 blocks beside them for the int4 tier
(backends/engine/quant/gguf_blocks.py). Idempotent: a prepared model is skipped at once."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from .engine.quant.gguf_blocks import Q4_1_FILE, extract_q4_1  # noqa: E402
from .engine.model.models import BUNDLED, model_dir  # noqa: E402

DONE_MARKER = ".prepared"
Q4_1_MODELS = {"smollm2-135m"}  # GGUFs whose linear layers ship as Q4_1 (Gemma's are Q4_K/Q6_K)


def is_prepared(name: str) -> bool:
    folder = model_dir(name)
    return (folder / DONE_MARKER).exists() and (name not in Q4_1_MODELS or (folder / Q4_1_FILE).exists())


def prepare(name: str) -> Path:
    out = model_dir(name)
    if not (out / DONE_MARKER).exists():
        convert(name)
    if name in Q4_1_MODELS and not (out / Q4_1_FILE).exists():
        with tempfile.TemporaryDirectory() as scratch:
            count = extract_q4_1(BUNDLED[name].locate_gguf(Path(scratch)), out)
        print(f"[prepare] {name}: kept the GGUF's Q4_1 blocks of {count} layers for --quantization int4", flush=True)
    return out


def convert(name: str) -> Path:
    out = model_dir(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = BUNDLED[name]
    started = time.time()
    print(f"[prepare] {name}: converting GGUF to safetensors (one time, ~30 s) ...", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        gguf = spec.locate_gguf(Path(scratch))
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # A GGUF-loaded model refuses save_pretrained while it still looks quantized;
        # the weights are already dequantized to fp32, so drop the quantizer marks.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp_out = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp_out, ignore_errors=True)
        model.save_pretrained(tmp_out)
        tokenizer.save_pretrained(tmp_out)
        if spec.chat and not getattr(tokenizer, "chat_template", None):
            raise RuntimeError(f"{name}: the chat template was lost in conversion")
        (tmp_out / DONE_MARKER).write_text(f"converted from {spec.gguf_file}\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp_out.rename(out)  # atomic: a half-written folder never looks prepared
    print(f"[prepare] {name}: ready in {time.time() - started:.1f} s at {out}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=sorted(BUNDLED), help="models to prepare (default: all)")
    args = parser.parse_args(argv)
    for name in args.names:
        if name not in BUNDLED:
            parser.error(f"unknown model {name!r}; known: {sorted(BUNDLED)}")
        if is_prepared(name):
            print(f"[prepare] {name}: already prepared at {model_dir(name)}", flush=True)
        else:
            prepare(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
