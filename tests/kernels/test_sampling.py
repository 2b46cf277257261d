"""The sampling kernels (kernels/sampling.py) on plain tensors: top-k/top-p filters, greedy and
seeded rows, the exponential race that draws by weight, and the OpenAI/HF penalties."""
import torch

from kernels.sampling import (RowParams, apply_penalties, draw, host_to_device, padded_ids, probabilities, sample,
                              select_rows)


def test_top_k_and_top_p_restrict_the_support():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]] * 3)
    params = RowParams.build([1.0] * 3, [2, 0, 0], [1.0, 0.5, 1.0], [None] * 3, logits.device)
    probs = probabilities(logits, params)
    assert (probs[0, 2:] == 0).all() and probs[0, :2].sum().item() == 1.0
    assert probs[1, 0] > 0 and (probs[1, 1:] == 0).all()  # top token alone holds > 50%
    assert torch.allclose(probs[2], logits[2].softmax(-1))  # a row asking for neither keeps every token


def test_greedy_rows_and_seeded_rows():
    logits = torch.randn(3, 50)

    def params():
        return RowParams.build([0.0, 1.0, 1.0], [0] * 3, [1.0] * 3,
                               [None, torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)], logits.device)

    a, b = sample(logits, params()), sample(logits, params())
    assert a[0] == logits[0].argmax() and a.tolist() == b.tolist()


def test_the_exponential_race_draws_each_token_by_its_weight():
    weights = torch.tensor([[0.5, 0.0, 1.5, 2.0]])  # unnormalised, with a zero
    gen = torch.Generator().manual_seed(0)
    counts = torch.bincount(torch.cat([draw(weights.expand(4000, 4), [None] * 4000),
                                       torch.stack([draw(weights, [gen]) for _ in range(500)]).view(-1)]),
                            minlength=4).float()
    assert counts[1] == 0
    assert torch.allclose(counts / counts.sum(), weights[0] / weights.sum(), atol=0.03)


def test_greedy_rows_ignore_the_noise():
    logits = torch.randn(4, 64)
    params = RowParams.build([0.0, 0.0, 0.0, 0.0], [0, 5, 0, 0], [1.0, 1.0, 0.5, 1.0], [None] * 4, logits.device)
    assert torch.equal(sample(logits, params), logits.argmax(-1))


def test_penalties_kernel_follows_openai_and_hf_definitions():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0], [2.0, -1.0, 0.5, 3.0]])
    device = logits.device
    out = apply_penalties(logits, context_ids=padded_ids([[0, 1, 3, 3], [2]], 4, device),
                          output_ids=padded_ids([[3, 3, 1], []], 4, device),
                          presence=torch.tensor([0.5, 0.0]), frequency=torch.tensor([0.25, 0.0]),
                          repetition=torch.tensor([2.0, 1.0]))
    # token 0: prompt only -> 2/2; token 1: negative, once in output -> -1*2 - 0.25 - 0.5;
    # token 2 untouched; token 3: twice in output -> 3/2 - 0.5 - 0.5
    assert torch.allclose(out[0], torch.tensor([1.0, -2.75, 0.5, 0.5]))
    assert torch.equal(out[1], logits[1])  # a row that asks for no penalty (its padding included) is untouched


def test_rows_are_selected_without_an_index_from_the_host():
    """A decode step's rows are consecutive: a view, no index copied over; other rows are gathered
    through an index sent like every per-row setting (host_to_device), with the same values."""
    logits = torch.arange(24.0).view(6, 4)
    consecutive = select_rows(logits, [2, 3, 4])
    assert consecutive.data_ptr() == logits[2].data_ptr() and torch.equal(consecutive, logits[[2, 3, 4]])
    scattered = select_rows(logits, [5, 0, 3])
    assert torch.equal(scattered, logits[[5, 0, 3]])
    assert host_to_device([0.5, 1.0], torch.float32, torch.device("cpu")).tolist() == [0.5, 1.0]
