"""The exported classifier (classifier/export.py) evaluated on the n-grams one request has.

onnxruntime builds both TF-IDF rows densely (27,923 columns) and spends most of a request's
classification on them: normalising, concatenating, multiplying the whole row. Here only the
columns present are touched: word n-grams are looked up in dicts, character n-grams walk a
trie held in one small array (one gather per gram length over all positions). The values are
onnxruntime's own within float rounding (tests/classifier/test_sparse_model.py compares them);
`SparseModel.of` returns None for a graph of any other shape, and the caller keeps onnxruntime.
"""
from __future__ import annotations

import functools
import re
from itertools import repeat
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

# The graph export.py writes, node by node; anything else is not evaluated here.
_EXPECTED_OPS = (["Identity"] * 2 + ["Tokenizer", "Flatten", "TfIdfVectorizer", "Mul", "ReduceL2", "Max", "Div",
                                      "Identity"] * 2 +
                 ["Split", "Sub", "Div", "MatMul", "Mul", "Concat", "MatMul", "Add", "Softmax"])
_WORD_PATTERNS = {"[a-zA-Z0-9_]+"}  # the tokenizers' patterns re matches exactly as onnxruntime's RE2 does
_ASCII = 128


class _Stage:
    """One TF-IDF stage folded into the logistic regression: per column, a row of the weights times
    idf (the numerator of the normalised row's product) and idf squared (for its norm)."""

    def __init__(self, ns: range, weights: np.ndarray, idf: np.ndarray, eps: float):
        self.ns, self.eps = ns, eps
        self.rows = np.hstack([idf[:, None] * weights, idf[:, None] ** 2])

    def logits(self, text: str) -> np.ndarray | float:
        """This stage's share of the logits: its normalised TF-IDF row times its weights."""
        cols = self.columns(text)  # one per gram found, repeats included
        if not len(cols):
            return 0.0
        rows = self.rows.take(cols, axis=0)  # per gram: weights * idf, then idf^2
        total = np.ones(len(cols)) @ rows  # a product, not .sum(axis=0): several times faster down a tall array
        norm = np.sqrt(np.bincount(cols)[cols] @ rows[:, -1])  # ||tf * idf||^2: over grams, count * idf^2
        return total[:-1] / max(norm, self.eps)

    def columns(self, text: str) -> np.ndarray:
        raise NotImplementedError


class _Words(_Stage):
    def __init__(self, pattern: str, grams: dict[str | tuple[str, ...], int], *args):
        super().__init__(*args)
        self.pattern, self.grams = re.compile(pattern), grams

    def columns(self, text: str) -> np.ndarray:
        tokens = self.pattern.findall(text)
        found = []
        for n in self.ns:  # a unigram's key is its token, a longer gram's the tuple of its tokens
            keys = tokens if n == 1 else zip(*(tokens[i:] for i in range(n)))
            found += map(self.grams.get, keys, repeat(-1))
        cols = np.array(found, np.int64)
        return cols[cols >= 0]


class CharGrams(_Stage):
    """Character grams walk a trie: node = child[node * width + symbol], where symbols number the
    characters the grams use (0: any other) and node 0 is the root, node 1 dead. A node's column is
    `column[node]`, -1 when the path so far is not a gram. Nodes of the longest grams come last and
    have no row of children: the table stays small enough to stay in cache."""

    def __init__(self, grams: dict[str | tuple[str, ...], int], *args):
        super().__init__(*args)
        alphabet = sorted({ch for gram in grams for ch in gram})
        self.symbol = np.zeros(_ASCII, np.int32)
        self.symbol[[ord(ch) for ch in alphabet]] = np.arange(1, len(alphabet) + 1)
        self.width = len(alphabet) + 1
        edges: dict[tuple[int, int], int] = {}  # (parent, symbol) -> child, numbered as made
        depth, column = [0, 0], [-1, -1]
        for gram, col in grams.items():
            node = 0
            for ch in gram:
                edge = (node, int(self.symbol[ord(ch)]))
                if edge not in edges:
                    edges[edge] = len(column)
                    depth.append(depth[node] + 1)
                    column.append(-1)
                node = edges[edge]
            column[node] = col
        # renumber: root, dead, then the nodes with children, then the longest grams' nodes
        order = np.argsort(np.asarray(depth) == self.ns.stop - 1, kind="stable")
        new_id = np.empty(len(order), np.int32)
        new_id[order] = np.arange(len(order))
        rows = int(np.count_nonzero(np.asarray(depth) < self.ns.stop - 1))
        self.trie = np.ones(rows * self.width, np.int32)
        for (parent, sym), child in edges.items():
            self.trie[new_id[parent] * self.width + sym] = new_id[child]
        self.column = np.asarray(column, np.int64)[order]

    def columns(self, text: str) -> np.ndarray:
        symbols = self.symbol.take(np.frombuffer(text.encode("ascii"), np.uint8))
        nodes, counted = np.zeros(len(symbols), np.int32), []
        for depth in range(1, self.ns.stop):  # nodes[i]: the node of the gram starting at i, `depth` long
            nodes = self.trie.take(nodes[:len(symbols) - depth + 1] * self.width + symbols[depth - 1:])
            if depth in self.ns:
                counted.append(nodes)
        cols = self.column.take(np.concatenate(counted))
        return cols[cols >= 0]


class SparseModel:
    """probs(text, numeric) -> float32 [classes] for one request, as the ONNX graph computes them."""

    def __init__(self, words: _Words, chars: CharGrams, numeric_weights: np.ndarray, bias: np.ndarray):
        self.words, self.chars = words, chars
        self.numeric_weights, self.bias = numeric_weights, bias  # scaling and centroids folded in

    @staticmethod
    def reads(text: str) -> bool:
        """Whether this text is evaluated here: ASCII on one line, as textnorm.model_text writes it
        (RE2's `.` in the character tokenizer stops at a newline; the trie would not)."""
        return text.isascii() and "\n" not in text

    def probs(self, text: str, numeric: np.ndarray) -> np.ndarray:
        z = self.words.logits(text) + self.chars.logits(text) + numeric @ self.numeric_weights + self.bias
        e = np.exp(z - z.max())
        return (e / e.sum()).astype(np.float32)  # the graph's output type

    @classmethod
    def of(cls, model: onnx.ModelProto) -> "SparseModel | None":
        """The model as a SparseModel, or None when its graph is not the one export.py writes."""
        nodes = list(model.graph.node)
        if [n.op_type for n in nodes] != _EXPECTED_OPS:
            return None
        init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
        named = {n.name: {a.name: helper.get_attribute_value(a) for a in n.attribute} for n in nodes}
        stages = [_grams(named.get(f"{p}_Tokenizer"), named.get(f"{p}_TfIdfVectorizer")) for p in ("w", "c")]
        if None in stages or stages[1][0] != ".":
            return None
        weight = init["lr_weight"]  # rows: word columns, char columns, structural features, tier similarities
        n_words, n_chars = len(init["w_idfcst"]), len(init["c_idfcst"])
        n_structural, n_tiers = int(init["num_split"][0]), init["tier_centroids"].shape[1]
        if n_words + n_chars + n_structural + n_tiers != len(weight):
            return None
        word_w, char_w = weight[:n_words], weight[n_words:n_words + n_chars]
        scaled_w, sim_w = weight[n_words + n_chars:-n_tiers], weight[-n_tiers:]
        (word_pattern, word_grams, word_ns), (_, char_grams, char_ns) = stages
        if word_pattern not in _WORD_PATTERNS or any(not g.isascii() for gram in char_grams for g in gram):
            return None
        numeric_weights = np.vstack([scaled_w / init["num_scale"][:, None],
                                     init["tier_centroids"] @ sim_w * init["sim_scale"]])
        bias = init["lr_bias"] - (init["num_mean"] / init["num_scale"]) @ scaled_w
        eps = float(init["l2_norm_eps"])
        return cls(_Words(word_pattern, word_grams, word_ns, word_w, init["w_idfcst"], eps),
                   CharGrams(char_grams, char_ns, char_w, init["c_idfcst"], eps), numeric_weights, bias)


def _grams(tokenizer: dict | None, tfidf: dict | None):
    """(token pattern, {gram: column}, gram lengths counted) of one stage, or None if it is not a
    plain count (TF, no skips) over RE2-compatible tokens."""
    if tokenizer is None or tfidf is None or tokenizer.get("mark") or tokenizer.get("mincharnum") != 1 \
            or tfidf.get("mode") != b"TF" or tfidf.get("max_skip_count", 0) != 0 or "pool_strings" not in tfidf:
        return None
    pool = [s.decode() for s in tfidf["pool_strings"]]
    starts = list(tfidf["ngram_counts"]) + [len(pool)]
    columns = iter(tfidf["ngram_indexes"])
    ns = range(tfidf["min_gram_length"], tfidf["max_gram_length"] + 1)
    grams: dict[str | tuple[str, ...], int] = {}
    for n, (begin, end) in enumerate(zip(starts, starts[1:]), start=1):
        for at in range(begin, end, n):
            col = next(columns)
            if n in ns:
                grams[pool[at] if n == 1 else tuple(pool[at:at + n])] = int(col)
    return tokenizer["tokenexp"].decode(), grams, ns


def sparse_model(path: Path) -> SparseModel | None:
    """The model file as a SparseModel (None for another graph), built once per file version: every
    gateway in a test process loads the same model."""
    stat = path.stat()
    return _built(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _built(path: str, _mtime_ns: int, _size: int) -> SparseModel | None:
    return SparseModel.of(onnx.load(path))
