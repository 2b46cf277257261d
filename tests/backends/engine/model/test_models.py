"""The direct tokenizer build (backends.engine.model.models.load_tokenizer) behaves exactly like
AutoTokenizer on both prepared models: ids, special tokens, decoding and the chat template."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from backends.engine.model.models import load_tokenizer, model_dir

TEXTS = ["Hello world", " leading space", "Ünïcödé ✓ 日本語 🙂", "a\n\nb\tc  d", "",
         "def f(x):\n    return x**2  # comment", "<bos>inline specials<eos><|im_start|>"]


@pytest.mark.slow  # Gemma 3's 262k vocabulary, twice
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_direct_build_equals_auto_tokenizer(name):
    path = model_dir(name)
    reference, fast = AutoTokenizer.from_pretrained(path), load_tokenizer(path)
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "all_special_ids", "chat_template"):
        assert getattr(fast, attr) == getattr(reference, attr), attr
    assert len(fast) == len(reference)
    for text in TEXTS:
        ids = reference(text)["input_ids"]
        assert fast(text)["input_ids"] == ids, text
        for skip in (False, True):
            assert fast.decode(ids, skip_special_tokens=skip) == reference.decode(ids, skip_special_tokens=skip)
        assert fast.convert_ids_to_tokens(ids) == reference.convert_ids_to_tokens(ids)
    if reference.chat_template:
        chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there?"}]
        assert (fast.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
                == reference.apply_chat_template(chat, tokenize=False, add_generation_prompt=True))
