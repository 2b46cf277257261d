"""Features rewritten for speed count exactly what the original regexes (which the shipped
model was trained with) count."""
import re

import pytest

from classifier import features
from classifier.features import code_chars, cue_counts
from classifier.textnorm import normalize_text, split_request


def _words(*items: str) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(items) + r")\b")


REFERENCE = {  # the regexes the shipped model was trained with
    "constraint": _words("must", "should", "exactly", "at least", "at most", "no more than", "without",
                         "only", "include", "ensure", "avoid", "each", "every", "under", "within",
                         "format", "json", "table", "headings?", "requirements?"),
    "code": _words("def", "return", "function", "class", "import", "select", "const", "let", "var",
                   "public", "fn", "func", "async", "await", "sql", "python", "javascript", "code",
                   "bug", "api", "docker\\w*", "query", "regex", "compile\\w*"),
    "math": _words("solve", "equation", "integral", "derivative", "limit", "probability", "matrix",
                   "prove", "theorem", "factor", "calculate", "compute", "sum", "percent", "x"),
    "reasoning": _words("why", "explain", "step by step", "compare", "analy[sz]e", "trade-?offs?",
                        "evaluate", "justify", "reason\\w*", "plan", "diagnose", "weigh", "pros",
                        "cons", "argue", "critically", "assess"),
    "expert": _words("prove", "proof", "rigorous\\w*", "theorem", "derive", "formal\\w*", "architect\\w*",
                     "scalab\\w*", "distributed", "consistency", "replication", "failure modes?",
                     "lower bound", "literature", "historiograph\\w*", "equilibrium", "threat-model"),
    "brevity": _words("one word", "one sentence", "briefly", "short", "yes or no", "tl;?dr", "quick",
                      "concise", "simple terms"),
    "detail": _words("in detail", "detailed", "comprehensive", "thorough\\w*", "exhaustive",
                     "full", "complete", "in depth"),
}
REQUESTED = re.compile(r"(\d{1,5})[ -]?(words?|pages?|paragraphs?|sentences?|bullet points?|items?|sections?|entries)")
CODE_CHARS = re.compile(r"[{};=<>\[\]()]|```|::|->|=>")
MATH_CHARS = re.compile(r"[0-9][0-9.,]*|[+\-*/^=<>]")
EDGE_CASES = [
    "step by step by step; at least at most no more than; tl;dr tldr tl;;dr trade-off tradeoffs trade--off",
    "yes or no more than, one word one sentence; in detail in depth; failure modes failure mode threat-model",
    "x x_x x2 prove theorem docker dockerfile reasoning headings heading headingss analyse analyze analyzes",
    "must_not must-not mustn't only-only __init__ only. (each) every1 eachother at-least at  least tl;dr;dr",
    "12words 123456 words 5-pages 3 bullet points 1,000 words 3.5 pages -> => ::: ```` --> =>> a->>b",
    "x = (a+b)*c^2 <= 10,5.. .5 1. 2, -3 ={}[]();", "", "x", "only", "at least", "ONLY Each",
    "détaillé only ñ each", "\u00a0only\u2003each", "in in detail detail",
]


def _check_counts(task: str) -> None:
    scan = normalize_text(task)
    assert cue_counts(scan) == _reference(scan), scan[:200]
    assert features.REQUESTED.findall(scan) == REQUESTED.findall(scan)
    assert len(features.MATH_CHARS.findall(scan)) == len(MATH_CHARS.findall(scan))
    assert code_chars(task) == len(CODE_CHARS.findall(task))


def _reference(scan: str) -> list[int]:
    return [len(rx.findall(scan)) for rx in REFERENCE.values()]


def test_cue_names_and_order_are_unchanged():
    assert list(features.CUES) == list(REFERENCE)


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_count_like_the_regexes(text):
    _check_counts(text)
    assert cue_counts(text) == _reference(text)  # also on raw (non-ASCII, mixed-case) text


def test_corpus_counts_like_the_regexes(splits):
    rows = splits["test"] + splits["heldout"] + splits["validation"]
    for row in rows:
        _check_counts(split_request(row.get("messages"), row.get("prompt"))[0])
