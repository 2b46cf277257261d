"""Distil the packaged MiniLM into the static token vectors the classifier ships with.

    HF_HUB_OFFLINE=1 python -m classifier.static_vectors_build   # ~1 min, writes classifier/model/

model2vec (distill) runs MiniLM once over its vocabulary, applies PCA and SIF weighting, and
gives one vector per token. We re-index its rows by MiniLM's own tokenizer.json ids, so
serving needs only `tokenizers` and numpy (classifier/static_vectors.py). The trained model
depends on these exact vectors: regenerate them only together with `python -m classifier train`.
Build-time only: imports model2vec, torch and transformers.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .static_vectors import DIMS, VECTORS_FILE, minilm_source, minilm_tokenizer

OUT_DIR = Path(__file__).resolve().parent / "model"


def distil(dims: int = DIMS) -> np.ndarray:
    """[MiniLM vocab, dims] float16; tokens model2vec dropped (unused slots) stay zero."""
    from model2vec.distill import distill

    static = distill(model_name=str(minilm_source()), pca_dims=dims)
    m2v_vocab = static.tokenizer.get_vocab()
    tok = minilm_tokenizer()
    table = np.zeros((tok.get_vocab_size(), dims), dtype=np.float16)
    for token, row in m2v_vocab.items():
        minilm_id = tok.token_to_id(token)
        if minilm_id is not None:
            table[minilm_id] = static.embedding[row]
    unk = tok.token_to_id("[UNK]")
    table[unk] = 0  # model2vec drops unknown tokens from the mean; a zero row is skipped too
    return table


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m classifier.static_vectors_build")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--dims", type=int, default=DIMS)
    args = parser.parse_args()
    table = distil(args.dims)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / VECTORS_FILE, table)
    print(f"{args.out / VECTORS_FILE}: {table.shape[0]} tokens x {table.shape[1]} dims")


if __name__ == "__main__":
    main()
