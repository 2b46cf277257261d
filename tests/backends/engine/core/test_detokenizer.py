from transformers import AutoTokenizer

from backends.engine.core.detokenizer import IncrementalDetokenizer
from backends.engine.model.models import model_dir

TEXT = "Café ☕ naïve 東京タワー 🚀🎉 done."


def stream(text: str, stop=None):
    tokenizer = AutoTokenizer.from_pretrained(model_dir("smollm2-135m"))
    ids = tokenizer.encode(text)
    detok = IncrementalDetokenizer(tokenizer, tokenizer.encode("Say:"), stop)
    pieces = []
    for i, token in enumerate(ids):
        detok.add(token)
        pieces.append(detok.take(final=i == len(ids) - 1 or detok.stopped))
        if detok.stopped:
            break
    return pieces, tokenizer.decode(ids)


def test_multibyte_characters_are_never_split():
    pieces, full = stream(TEXT)
    assert all("\ufffd" not in p for p in pieces)
    assert "".join(pieces) == full


def test_stop_string_is_never_emitted_even_in_part():
    pieces, _ = stream("alpha beta STOP gamma", stop=["STOP"])
    assert "".join(pieces) == "alpha beta "
    assert all("S" not in p for p in pieces)
