"""The embeddings worker (`--task embed`, the packaged MiniLM) through real HTTP and the openai SDK."""
import base64

import numpy as np
import pytest

from backends.embedder import Embedder
from tests.support.workers import running_worker
from tests.support.kinds import starts_processes

openai = pytest.importorskip("openai", reason="the openai client is a test dependency (docs/gpu.md lists the wheels)")


@pytest.fixture(scope="module")
@starts_processes
def worker():
    with running_worker("minilm", "--task", "embed") as running:
        yield running.base


@pytest.fixture(scope="module")
def client(worker):
    with openai.OpenAI(base_url=worker + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def test_model_card_says_embeddings(client):
    card = client.models.list().data[0]
    assert card.id == "minilm" and card.capabilities["embeddings"] is True
    assert card.capabilities["dimensions"] == 384


def test_vectors_are_unit_and_meaningful(client):
    out = client.embeddings.create(model="minilm", encoding_format="float",
                                   input=["A cat sits on the mat.", "A kitten is sitting on a rug.",
                                          "Quarterly revenue rose by eight percent."])
    vectors = np.array([d.embedding for d in out.data])
    assert vectors.shape == (3, 384) and [d.index for d in out.data] == [0, 1, 2]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert out.usage.prompt_tokens == out.usage.total_tokens > 10


def test_matches_the_model_run_directly(client):
    """Same vector as the embedder in this process, i.e. batching and padding change nothing."""
    text = "Paged attention keeps the KV cache in fixed-size blocks."
    served = client.embeddings.create(model="minilm", input=[text, "short"], encoding_format="float").data[0]
    local = Embedder("minilm")
    direct = local.embed([local.token_ids(text)])[0].numpy()
    assert np.allclose(served.embedding, direct, atol=1e-5)


def test_token_arrays_equal_their_text(client):
    local = Embedder("minilm")
    text = "tiergate routes requests"
    ids = local.tokenizer.encode(text, add_special_tokens=False)
    by_text, by_ids = client.embeddings.create(model="minilm", input=[text], encoding_format="float").data[0], \
        client.embeddings.create(model="minilm", input=[ids], encoding_format="float").data[0]
    assert np.allclose(by_text.embedding, by_ids.embedding, atol=1e-6)


def test_base64_decodes_to_the_float_vector(worker, client):
    floats = client.embeddings.create(model="minilm", input="base64 check", encoding_format="float").data[0]
    raw = client.embeddings.with_raw_response.create(model="minilm", input="base64 check",
                                                     encoding_format="base64")
    encoded = raw.http_response.json()["data"][0]["embedding"]
    assert isinstance(encoded, str)
    assert np.allclose(np.frombuffer(base64.b64decode(encoded), dtype="<f4"), floats.embedding, atol=1e-6)


def test_dimensions_only_at_native_size(client):
    assert len(client.embeddings.create(model="minilm", input="x", dimensions=384,
                                        encoding_format="float").data[0].embedding) == 384
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="minilm", input="x", dimensions=128)
    assert err.value.body["param"] == "dimensions"


def test_bad_inputs_are_400s(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="minilm", input=[[999999]])
    assert err.value.body["param"] == "input"
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="minilm", input="word " * 600)
    assert err.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="other", input="x")
