"""Static MiniLM vectors: MiniLM's token ids, meaning-bearing means, and a model tied to its vectors."""
import json
import shutil

import numpy as np
import pytest

from classifier import static_vectors
from classifier.features import FEATURE_NAMES, extract
from classifier.runtime import METADATA_FILE, MODEL_FILE, PACKAGED_MODEL_DIR, ComplexityClassifier
from classifier.static_vectors import DIMS, VECTORS_PATH, minilm_tokenizer, packaged


@pytest.fixture(scope="module")
def vectors():
    return packaged()


@pytest.mark.parametrize("text", ["Design YouTube!", "what_is x+y=3? don't", "Привет! Как дела? こんにちは",
                                  "naïve café résumé", "def f(a, b):\n    return a**b  # power"])
def test_word_cache_gives_minilm_token_ids(vectors, text):
    known = np.load(VECTORS_PATH).any(axis=1)
    expected = [i for i in minilm_tokenizer().encode(text, add_special_tokens=False).ids if known[i]]
    assert vectors.token_ids(text) == expected


def test_similar_requests_get_similar_vectors(vectors):
    design = vectors.embed("design youtube")
    assert design @ vectors.embed("design a video streaming platform at scale") > 0.6
    assert design @ vectors.embed("hi there, how are you?") < 0.3


def test_vectors_are_unit_length_or_zero(vectors):
    assert np.linalg.norm(vectors.embed("prove there are infinitely many primes")) == pytest.approx(1, abs=1e-5)
    assert not vectors.embed("").any() and not vectors.embed("   \n").any()


def test_long_text_reads_head_and_tail_only(vectors):
    middle = " filler words about gardening" * 100  # far past HEAD_CHARS + TAIL_CHARS
    base = vectors.embed("Summarise this." + middle + " Thanks, then prove Fermat's little theorem.")
    other_middle = vectors.embed("Summarise this." + middle[:1000] + middle[1000:2000].replace("gardening", "astronomy") + middle[2000:]
                                 + " Thanks, then prove Fermat's little theorem.")
    other_tail = vectors.embed("Summarise this." + middle + " Thanks, then list three fruit.")
    assert np.allclose(base, other_middle)
    assert not np.allclose(base, other_tail)


def test_shipped_artifact_is_compact():
    table = np.load(VECTORS_PATH)
    assert table.dtype == np.float16 and table.shape == (minilm_tokenizer().get_vocab_size(), DIMS)
    assert VECTORS_PATH.stat().st_size < 5_000_000


def test_features_end_with_the_task_vector(vectors):
    _, numeric = extract(messages=[{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "design youtube"}])
    assert numeric.shape == (len(FEATURE_NAMES),)
    assert np.allclose(numeric[-DIMS:], vectors.embed("design youtube"))


def test_model_trained_on_other_vectors_is_refused(shipped, tmp_path):
    assert shipped.metadata["static_vectors_sha256"] == static_vectors.vectors_digest()
    shutil.copy(PACKAGED_MODEL_DIR / MODEL_FILE, tmp_path / MODEL_FILE)
    (tmp_path / METADATA_FILE).write_text(json.dumps({**shipped.metadata, "static_vectors_sha256": "0" * 16}))
    with pytest.raises(ValueError, match="static vectors"):
        ComplexityClassifier.load(tmp_path)



@pytest.mark.parametrize("text", ["".join(map(chr, range(0x3000))), "youtube, (youtube) youtube!! __init__ x+y=3",
                                  "a\u00a0b\u2003c\x1cd\x85e\u200bf", "don't!!! (ok) don't!!! (ok)"])
def test_chunk_cache_gives_the_ids_of_its_pieces(vectors, text):
    """Cached whitespace chunks give the ids the pieces (PIECES) give one by one, first call and later."""
    from classifier.static_vectors import HEAD_CHARS, PIECES, TAIL_CHARS
    from classifier.textnorm import clip
    expected = [i for piece in PIECES.findall(clip(text, HEAD_CHARS, TAIL_CHARS).lower())
                for i in vectors.tokenizer.encode(piece, add_special_tokens=False).ids if vectors.known[i]]
    assert vectors.token_ids(text) == expected
    assert vectors.token_ids(text) == expected
