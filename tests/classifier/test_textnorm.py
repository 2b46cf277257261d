"""Text normalisation: ASCII out, stable for any Unicode form, one code path for train and serve."""
import re
import unicodedata

from classifier import features, textnorm


def test_output_is_ascii_single_spaced_lowercase():
    for text in ["Привет, Мир!", "東京から大阪まで", "Ça coûte 5 €", "x ≤ ∑ y", "A\n\n B\t C"]:
        out = textnorm.normalize_text(text)
        assert out.isascii() and out == out.lower() and "  " not in out and out == out.strip()


def test_non_ascii_scripts_become_tokens():
    out = textnorm.normalize_text("Привет мир 你好")
    tokens = re.findall(r"[a-zA-Z0-9_]+", out)  # what ONNX's tokenizer will see
    assert len(tokens) == 3 and all(t.startswith("q") for t in tokens)
    assert textnorm.normalize_text("Привет") != textnorm.normalize_text("Пока")


def test_unicode_forms_normalise_identically():
    composed = "Résumé naïve café Ångström"
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        assert textnorm.normalize_text(unicodedata.normalize(form, composed)) == "resume naive cafe angstrom"
    assert textnorm.normalize_text("ｆｕｌｌｗｉｄｔｈ") == "fullwidth"


def test_math_symbols_get_names():
    assert textnorm.normalize_text("∫ f ≤ ∞") == "integral f <= infinity"


def test_training_and_serving_share_extract():
    """Serving calls features.extract per request; training calls extract_many: same result."""
    rows = [{"prompt": "¿Cuál es la capital de Francia?"},
            {"messages": [{"role": "system", "content": "Быть кратким."}, {"role": "user", "content": "你好"}]}]
    texts, numeric = features.extract_many(rows)
    for row, text, vec in zip(rows, texts, numeric):
        one_text, one_vec = features.extract(row.get("messages"), row.get("prompt"))
        assert one_text == text and (one_vec == vec).all()
    assert texts[0].isascii() and texts[1].isascii() and "zctx" in texts[1]


def test_long_text_is_clipped_for_tfidf_only():
    long = "word " * 5000
    text, vec = features.extract(prompt=long)
    assert len(text) <= textnorm.MAX_TASK_CHARS + textnorm.TASK_TAIL_CHARS + 1
    assert vec[features.FEATURE_NAMES.index("log_chars_task")] > 10  # full length seen
