"""Embedding batches are padded to a few widths, and padding leaves the vectors as they were."""
import pytest
import torch

from backends.embedder import Embedder, padded_length


def test_widths_are_few_and_hold_the_batch():
    widths = {padded_length(n, 512) for n in range(1, 513)}
    assert widths == {8, 16, 32, 64} | {64 * k for k in range(2, 9)}
    for n in range(1, 513):
        assert padded_length(n, 512) >= n
    assert padded_length(600, 512) == 600  # past the model's limit the encoder refuses it, not the padding


@pytest.fixture(scope="module")
def embedder():
    return Embedder("minilm")


def test_padding_does_not_move_a_vector(embedder):
    ids = embedder.token_ids("a short sentence about rivers")
    alone = embedder.embed([ids])
    model = embedder.model
    exact_ids = torch.tensor([ids])
    hidden = model(input_ids=exact_ids, attention_mask=torch.ones_like(exact_ids)).last_hidden_state
    unpadded = torch.nn.functional.normalize(hidden.mean(1), p=2, dim=1)
    assert torch.allclose(alone, unpadded, atol=1e-5)
