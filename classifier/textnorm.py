"""The one text normalisation used by training and serving.

ONNX's string tokenizer drops non-ASCII words, so everything that reaches the TF-IDF
stage must be ASCII: accents are stripped (NFKD), a few math symbols get names, and any
remaining letter or digit of another script is spelled as `q` + its code point in
base-26 letters, so a Russian or Chinese word still becomes one stable ASCII token.
Whitespace is collapsed because scikit-learn's char analyzer collapses it too.
"""
from __future__ import annotations

import unicodedata

# Serving cost is bounded by truncating what TF-IDF sees; structural features see it all.
MAX_TASK_CHARS = 600
TASK_TAIL_CHARS = 200
MAX_CONTEXT_CHARS = 200

_SYMBOL_NAMES = {
    "∑": " sum ", "∫": " integral ", "√": " sqrt ", "≤": " <= ", "≥": " >= ", "≠": " != ",
    "∞": " infinity ", "π": " pi ", "∀": " forall ", "∃": " exists ", "→": " -> ", "×": " * ",
    "÷": " / ", "±": " +- ", "∈": " in ", "≈": " approx ", "∂": " partial ", "λ": " lambda ",
}


def _spell(code: int) -> str:
    letters = []
    while code:
        code, r = divmod(code, 26)
        letters.append(chr(97 + r))
    return "q" + "".join(reversed(letters))


class _AsciiTable(dict):
    """str.translate table computed lazily per code point and cached (fast on repeats)."""

    def __missing__(self, code: int):
        ch = chr(code)
        if code < 128:
            value = ch
        elif ch in _SYMBOL_NAMES:
            value = _SYMBOL_NAMES[ch]
        elif unicodedata.combining(ch):
            value = None
        elif ch.isspace():
            value = " "
        elif unicodedata.category(ch)[0] in "LN":
            value = _spell(code)
        else:
            value = " "
        self[code] = value
        return value


_TABLE = _AsciiTable()


def normalize_text(text: str) -> str:
    """Lowercase ASCII with single spaces; identical output in training and serving."""
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text).translate(_TABLE)
    return " ".join(text.lower().split())


def clip(text: str, head: int, tail: int = 0) -> str:
    if len(text) <= head + tail:
        return text
    return (text[:head].rstrip() + " " + text[-tail:].lstrip()) if tail else text[:head].rstrip()


def split_request(messages: list[dict] | None = None, prompt: str | None = None) -> tuple[str, str, list[dict]]:
    """(task, context, messages): the last user turn, everything before it, and the turns."""
    if messages is None:
        if prompt is None:
            raise ValueError("either messages or prompt is required")
        return prompt, "", [{"role": "user", "content": prompt}]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages) - 1)
    task = str(messages[last_user].get("content") or "") if messages else ""
    context = "\n".join(f"{m.get('role')}: {m.get('content') or ''}"
                        for i, m in enumerate(messages) if i != last_user)
    return task, context, messages


def model_text(norm_task: str, context: str) -> str:
    """The string fed to the TF-IDF stages: the task (already through normalize_text: the
    caller needs it too, and it is costly on non-ASCII text), then tagged context."""
    text = clip(norm_task, MAX_TASK_CHARS, TASK_TAIL_CHARS)
    if context:
        text += " zctx " + clip(normalize_text(context), MAX_CONTEXT_CHARS)
    return text
