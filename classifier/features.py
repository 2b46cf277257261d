"""Request -> (TF-IDF text, structural feature vector). Shared by training and serving.

Structural signals look at the whole request: all turns, the system prompt and the
conversation depth, plus cues in the task itself (questions, constraints, code, math,
reasoning words, requested output length). Counts are log-scaled so one huge prompt
does not dominate the linear model. The task's static MiniLM vector (static_vectors.py)
follows them: n-grams only match wording seen in training, the vector carries meaning
("design youtube" lands near "design a video platform at scale").
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import static_vectors
from .textnorm import model_text, normalize_text, split_request

_SCAN_CHARS = 6000  # cue counts and regexes look at most at this much of the task (latency bound)


# Each cue: (single-word patterns, phrases). Counted as `\b(?:all of them)\b` findall would,
# but without that regex: Python's re tries every position, for each of the seven cues
# (docs/routing.md, "Serving latency"). Words are counted per word run (cached), and a cue's phrase
# regex runs only when one of its phrases' literal heads is in the text. This equals the
# regex because no phrase contains, or starts with, a single-word match of its own cue
# (tests/classifier/test_feature_rewrites.py checks it against the regexes).
CUES = {
    "constraint": (["must", "should", "exactly", "without", "only", "include", "ensure", "avoid", "each", "every",
                    "under", "within", "format", "json", "table", "headings?", "requirements?"],
                   ["at least", "at most", "no more than"]),
    "code": (["def", "return", "function", "class", "import", "select", "const", "let", "var", "public", "fn",
              "func", "async", "await", "sql", "python", "javascript", "code", "bug", "api", "docker\\w*", "query",
              "regex", "compile\\w*"], []),
    "math": (["solve", "equation", "integral", "derivative", "limit", "probability", "matrix", "prove", "theorem",
              "factor", "calculate", "compute", "sum", "percent", "x"], []),
    "reasoning": (["why", "explain", "compare", "analy[sz]e", "tradeoffs?", "evaluate", "justify", "reason\\w*",
                   "plan", "diagnose", "weigh", "pros", "cons", "argue", "critically", "assess"],
                  ["step by step", "trade-offs?"]),
    "expert": (["prove", "proof", "rigorous\\w*", "theorem", "derive", "formal\\w*", "architect\\w*", "scalab\\w*",
                "distributed", "consistency", "replication", "literature", "historiograph\\w*", "equilibrium"],
               ["failure modes?", "lower bound", "threat-model"]),
    "brevity": (["briefly", "short", "tldr", "quick", "concise"],
                ["one word", "one sentence", "yes or no", "tl;dr", "simple terms"]),
    "detail": (["detailed", "comprehensive", "thorough\\w*", "exhaustive", "full", "complete"],
               ["in detail", "in depth"]),
}
_CUE_WORD_RX = [re.compile("|".join(words)) for words, _ in CUES.values()]
# (cue index, first words, literal heads, regex) per cue with phrases; a head is the phrase
# up to an optional trailing letter. Checking first words against the word set is cheaper
# than searching the text for every head.
_CUE_PHRASES = [(i, {re.match(r"[a-z]+", p)[0] for p in phrases},
                 [p.split("?")[0][:-1] if "?" in p else p for p in phrases],
                 re.compile(r"\b(?:" + "|".join(phrases) + r")\b"))
                for i, (_, phrases) in enumerate(CUES.values()) if phrases]
_PHRASE_FIRST_WORDS = frozenset().union(*(first for _, first, _, _ in _CUE_PHRASES))
_WORD_RUN = re.compile(r"\w+")
_NON_WORD = {c: " " for c in range(128) if not _WORD_RUN.fullmatch(chr(c))}  # ASCII -> word runs by split()
_cue_hits: dict[str, tuple[int, ...]] = {}  # word -> indices of the cues it is a word of
_CUE_CACHE_LIMIT = 200_000


def _new_cue_word(word: str) -> tuple[int, ...]:
    if len(_cue_hits) >= _CUE_CACHE_LIMIT:
        _cue_hits.clear()
    hits = _cue_hits[word] = tuple(i for i, rx in enumerate(_CUE_WORD_RX) if rx.fullmatch(word))
    return hits


def cue_counts(scan: str) -> list[int]:
    words = scan.translate(_NON_WORD).split() if scan.isascii() else _WORD_RUN.findall(scan)
    counts = [0] * len(CUES)
    found = list(map(_cue_hits.get, words))  # hot path in C: most words are cached misses, ()
    if None in found:
        found = [_new_cue_word(w) if h is None else h for w, h in zip(words, found)]
    for hits in filter(None, found):
        for i in hits:
            counts[i] += 1
    starts = _PHRASE_FIRST_WORDS.intersection(words)
    for i, first, heads, rx in _CUE_PHRASES if starts else ():
        if not first.isdisjoint(starts) and any(head in scan for head in heads):
            counts[i] += len(rx.findall(scan))
    return counts


# REQUESTED and MATH_CHARS start with one character class (`\d\d{0,4}`, not `\d{1,5}`): re skips
# to candidate characters in C instead of trying a match at every position.
REQUESTED = re.compile(r"(\d\d{0,4})[ -]?(words?|pages?|paragraphs?|sentences?|bullet points?|items?|sections?|entries)")
_UNIT_WORDS = {"w": 1, "p": 450, "s": 20, "b": 15, "i": 15, "e": 15}
_LIST_LINE = re.compile(r"(?m)^\s*(?:[-*•]|\d+[.)])\s")
# Code characters, as `[{};=<>\[\]()]|```|::|->|=>` would count them: "->" is one match either
# way (its ">" is in the class) and "=>" never matches (its "=" does), so str.count suffices.
_CODE_CHARS, _CODE_RUNS = "{};=<>[]()", ("```", "::")
MATH_CHARS = re.compile(r"[0-9+\-*/^=<>](?:(?<=[0-9])[0-9.,]*)?")  # a number or one operator

FEATURE_NAMES = [
    "log_chars_total", "log_chars_task", "log_words_task", "log_messages", "log_user_turns",
    "has_system", "log_system_chars", "log_assistant_chars", "log_questions", "log_lines",
    "log_list_items", "log_sentences", "log_code_fences", "code_char_density", "math_char_density",
    "non_ascii_ratio", "avg_word_len", "log_requested_words",
] + [f"log_cue_{name}" for name in CUES]
N_STRUCTURAL = len(FEATURE_NAMES)  # numeric columns before the static vector
FEATURE_NAMES += [f"static_{i}" for i in range(static_vectors.DIMS)]


def code_chars(text: str) -> int:
    return sum(map(text.count, _CODE_CHARS)) + sum(map(text.count, _CODE_RUNS))


def _requested_words(text: str) -> float:
    total = 0
    for number, unit in REQUESTED.findall(text):
        total = max(total, int(number) * _UNIT_WORDS.get(unit[0], 1))
    return math.log1p(total)


def extract(messages: list[dict] | None = None, prompt: str | None = None) -> tuple[str, np.ndarray]:
    """The model's two inputs for one request: normalised text and structural features."""
    task, context, turns = split_request(messages, prompt)
    norm_task = normalize_text(task)
    scan = norm_task[:_SCAN_CHARS]
    words = len(norm_task.split()) or 1
    system_chars = sum(len(str(m.get("content") or "")) for m in turns if m.get("role") == "system")
    assistant_chars = sum(len(str(m.get("content") or "")) for m in turns if m.get("role") == "assistant")
    non_ascii = len(task) - len(task.encode("ascii", "ignore"))  # code points > 127, counted in C
    n_chars = max(len(task), 1)
    values = [
        math.log1p(len(task) + len(context)), math.log1p(len(task)), math.log1p(words),
        math.log1p(len(turns)), math.log1p(sum(1 for m in turns if m.get("role") == "user")),
        float(system_chars > 0), math.log1p(system_chars), math.log1p(assistant_chars),
        math.log1p(task.count("?") + task.count("？")), math.log1p(task.count("\n")),
        math.log1p(len(_LIST_LINE.findall(task[:_SCAN_CHARS]))),
        math.log1p(scan.count(". ") + scan.count("? ") + 1), math.log1p(task.count("```")),
        code_chars(task[:_SCAN_CHARS]) / min(n_chars, _SCAN_CHARS),
        len(MATH_CHARS.findall(scan)) / max(len(scan), 1),
        non_ascii / n_chars, len(norm_task) / words, _requested_words(scan),
    ] + [math.log1p(n) for n in cue_counts(scan)]
    numeric = np.concatenate([np.asarray(values, dtype=np.float32), static_vectors.packaged().embed(task)])
    return model_text(norm_task, context), numeric


def extract_many(requests: list[dict]) -> tuple[list[str], np.ndarray]:
    """Batch form for training/evaluation rows shaped like `{"messages"|"prompt": ...}`."""
    texts, rows = [], []
    for req in requests:
        text, vec = extract(req.get("messages"), req.get("prompt"))
        texts.append(text)
        rows.append(vec)
    return texts, np.vstack(rows) if rows else np.zeros((0, len(FEATURE_NAMES)), np.float32)
