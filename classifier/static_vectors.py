"""Sentence meaning at gateway speed: static MiniLM token vectors, mean-pooled in numpy.

The vectors (classifier/model/static_vectors.npy, float16 [MiniLM vocab, DIMS]) were
distilled once from the packaged MiniLM with model2vec (classifier/static_vectors_build.py).
Serving needs only the Rust `tokenizers` library and numpy: split the text into words and
punctuation, turn each distinct word into MiniLM WordPiece ids once (its own tokenizer.json,
then cached: the tokenizer per request is slow, docs/routing.md), look the
ids up, average. Splitting where BERT's pre-tokenizer splits keeps the ids equal to MiniLM's,
except where a symbol touches a word ("€5"); training and serving share this code, so the
model sees the same vectors either way.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import re
from pathlib import Path

import numpy as np

from .embeddings import model_source as minilm_source
from .textnorm import clip

DIMS = 64
VECTORS_FILE = "static_vectors.npy"
VECTORS_PATH = Path(__file__).resolve().parent / "model" / VECTORS_FILE
# Head and tail of the task (the ask is usually at one end of pasted material); more text
# only costs latency.
HEAD_CHARS, TAIL_CHARS = 600, 200
# BERT splits on whitespace and on every punctuation character, underscore included.
PIECES = re.compile(r"[^\W_]+|[^\w\s]|_")
_CACHE_LIMIT = 200_000  # distinct words kept; cleared past this so memory stays bounded


def minilm_tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(minilm_source() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


@functools.cache
def vectors_digest(path: Path = VECTORS_PATH) -> str:
    """Recorded in a model's metadata: its weights are only valid with these exact vectors."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


class StaticVectors:
    def __init__(self, table: np.ndarray):
        self._table = table.astype(np.float32)
        # zero rows are tokens model2vec dropped ([UNK], unused slots): left out of the mean
        self.known = np.any(self._table != 0, axis=1)
        self.tokenizer = minilm_tokenizer()
        self._word_ids = self._whole_word_ids()

    @property
    def dims(self) -> int:
        return self._table.shape[1]

    def _whole_word_ids(self) -> dict[str, tuple[int, ...]]:
        """ASCII vocabulary entries as their own ids, known before the first request: WordPiece
        maps a word that is itself in the vocabulary to that one id, and lower-case ASCII passes
        the normaliser unchanged. Without this, a first-seen word calls the tokenizer,
        which made long prompts of new words the slowest 1% of requests."""
        return {token: ((i,) if self.known[i] else ()) for token, i in self.tokenizer.get_vocab().items()
                if token.isascii() and PIECES.fullmatch(token) and token == token.lower()}

    def _new_word(self, word: str) -> tuple[int, ...]:
        if len(self._word_ids) >= _CACHE_LIMIT:
            self._word_ids = self._whole_word_ids()
        found = self.tokenizer.encode(word, add_special_tokens=False).ids
        ids = self._word_ids[word] = tuple(i for i in found if self.known[i])
        return ids

    def token_ids(self, text: str) -> list[int]:
        """Ids of the known tokens of the text's head and tail."""
        # Pieces never span whitespace, so the cache also keeps whole chunks ("youtube,"): most
        # requests then need only str.split and one dict lookup per chunk, both in C (the
        # regex over every character is what it saves: docs/routing.md).
        chunks = clip(text, HEAD_CHARS, TAIL_CHARS).lower().split()
        found = list(map(self._word_ids.get, chunks))
        if None in found:
            found = [self._new_chunk(c) if ids is None else ids for c, ids in zip(chunks, found)]
        return list(itertools.chain.from_iterable(found))

    def _new_chunk(self, chunk: str) -> tuple[int, ...]:
        pieces = PIECES.findall(chunk)
        if pieces == [chunk]:
            return self._new_word(chunk)
        ids = []
        for piece in pieces:
            known = self._word_ids.get(piece)
            ids += self._new_word(piece) if known is None else known
        self._word_ids[chunk] = ids = tuple(ids)
        return ids

    def embed(self, text: str) -> np.ndarray:
        """L2-normalised mean of the text's token vectors; zeros when no token is known."""
        ids = self.token_ids(text)
        if not ids:
            return np.zeros(self.dims, dtype=np.float32)
        total = np.add.reduce(self._table[ids])  # normalised, the sum is the mean: np.mean costs more per call
        return total / max(float(np.sqrt(total @ total)), 1e-12)


@functools.cache
def packaged() -> StaticVectors:
    return StaticVectors(np.load(VECTORS_PATH))
