"""Token sampling on the device that holds the logits, with nothing read back to the host.

Which work a step needs (top-k, top-p, any random row, seeded rows) is decided on the host from
the requests' settings, never from tensor contents, so sampling costs no device sync: only the
chosen ids come back, once, when the engine reads them. `probabilities` is shared with
speculative verification, which must test drafts against the very same distribution.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def host_to_device(values: list, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Host values as a tensor on `device` with no wait: a copy from pageable memory makes the host
    wait for every kernel already queued (the step's forward); from pinned memory, non_blocking, it
    is queued behind them. The caching host allocator keeps the pinned buffer until the copy ran."""
    if torch.device(device).type != "cuda":
        return torch.tensor(values, dtype=dtype, device=device)
    return torch.tensor(values, dtype=dtype, pin_memory=True).to(device, non_blocking=True)


def select_rows(tensor: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """tensor[rows] along dim 0: a view where the rows are consecutive (a decode step's), else a
    gather through an index sent as host_to_device does. Never a host wait."""
    if rows and rows == list(range(rows[0], rows[0] + len(rows))):
        return tensor[rows[0]:rows[0] + len(rows)]
    return tensor.index_select(0, host_to_device(rows, torch.long, tensor.device))


@dataclass(frozen=True)
class RowParams:
    """Per-row settings as tensors on the logits' device, plus the host-side facts that
    decide which kernels run."""
    temperature: torch.Tensor  # [B] float; 0 = greedy
    top_k: torch.Tensor  # [B] long; 0 = off
    top_p: torch.Tensor  # [B] float; 1 = off
    max_top_k: int  # the largest top-k asked for (0: no row uses top-k)
    any_top_p: bool
    any_random: bool  # some row samples (temperature > 0)
    generators: tuple[torch.Generator | None, ...]  # per row; seeded requests draw from their own

    @classmethod
    def build(cls, temperature: list[float], top_k: list[int], top_p: list[float],
              generators: list[torch.Generator | None], device: torch.device) -> "RowParams":
        return cls(host_to_device(temperature, torch.float32, device), host_to_device(top_k, torch.long, device),
                   host_to_device(top_p, torch.float32, device),
                   max(top_k, default=0), any(p < 1.0 for p in top_p), any(t > 0 for t in temperature),
                   tuple(generators))


def probabilities(logits: torch.Tensor, params: RowParams) -> torch.Tensor:
    """logits [B, V] -> probs [B, V] after temperature, top-k and top-p. Greedy rows get a
    distribution too (temperature clamped); `sample` takes their argmax instead."""
    logits = logits.float() / params.temperature.clamp_min(1e-5)[:, None]
    if params.max_top_k:
        top = torch.topk(logits, min(params.max_top_k, logits.shape[-1]), dim=-1).values
        kth = top.gather(1, (params.top_k.clamp(1, top.shape[1]) - 1)[:, None])
        kth = kth.masked_fill(params.top_k[:, None] <= 0, float("-inf"))  # rows without top-k keep all
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.any_top_p:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(dim=-1)
        # Drop a token when the mass strictly before it already reaches top_p; the top token always stays.
        drop = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= params.top_p[:, None]
        drop &= (params.top_p < 1.0)[:, None]  # rounding never trims a row that asked for no top-p
        logits = torch.empty_like(logits).scatter_(1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return logits.softmax(dim=-1)


def draw(weights: torch.Tensor, generators) -> torch.Tensor:
    """One index per row of non-negative `weights` [B, V] (need not sum to 1), by the
    exponential race: argmax(w / E) with E ~ Exp(1) picks i with probability w_i / sum(w),
    with no sync and no sort. A seeded row's noise comes from its own generator."""
    noise = torch.empty_like(weights, dtype=torch.float32).exponential_()
    for i, gen in enumerate(generators):
        if gen is not None:  # drawn where the generator lives (the engine makes it on its device)
            noise[i] = torch.empty(weights.shape[1], device=gen.device).exponential_(generator=gen)
    # a zero draw would make 0 / 0 = NaN, which argmax would pick
    return (weights / noise.clamp_min_(torch.finfo(torch.float32).tiny)).argmax(dim=-1)


def sample(logits: torch.Tensor, params: RowParams) -> torch.Tensor:
    """logits [B, V] -> token ids [B] on the same device; temperature 0 means greedy."""
    greedy = logits.argmax(dim=-1)
    if not params.any_random:
        return greedy
    drawn = draw(probabilities(logits, params), params.generators)
    return torch.where(params.temperature > 0, drawn, greedy)


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """logits [B, V], bitmask [B, ceil(V'/32)] int32 (bit t set = token t allowed) -> masked logits.
    Tokens past the mask's width are disallowed."""
    bits = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    allowed = ((bitmask.unsqueeze(-1) >> bits) & 1).view(bitmask.shape[0], -1).bool()
    vocab = logits.shape[-1]
    if allowed.shape[1] < vocab:
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]))
    return logits.masked_fill(~allowed[:, :vocab], float("-inf"))


def padded_ids(rows: list[list[int]], pad: int, device: torch.device) -> torch.Tensor:
    """Ragged id lists as one [R, longest] tensor on `device`, short rows filled with `pad`."""
    width = max((len(r) for r in rows), default=0)
    return host_to_device([r + [pad] * (width - len(r)) for r in rows], torch.long, device).view(len(rows), width)


def apply_penalties(logits: torch.Tensor, context_ids: torch.Tensor, output_ids: torch.Tensor,
                    presence: torch.Tensor, frequency: torch.Tensor, repetition: torch.Tensor) -> torch.Tensor:
    """Rows [R, V]; ids [R, L] padded with V (see padded_ids); penalties [R]. OpenAI's presence and
    frequency penalties count the generated tokens; the HF/vLLM repetition penalty covers prompt
    and output (divide positive logits, multiply negative ones)."""
    rows, vocab = logits.shape
    seen = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=logits.device)
    seen = seen.scatter_(1, context_ids, True)[:, :vocab]
    scale = repetition[:, None].to(logits.dtype)
    logits = torch.where(seen, torch.where(logits > 0, logits / scale, logits * scale), logits)
    counts = torch.zeros(rows, vocab + 1, dtype=logits.dtype, device=logits.device)
    counts = counts.scatter_add_(1, output_ids, torch.ones_like(output_ids, dtype=logits.dtype))[:, :vocab]
    return logits - frequency[:, None] * counts - presence[:, None] * (counts > 0).to(logits.dtype)


def top_logprobs(logits: torch.Tensor, chosen: torch.Tensor, k: int):
    """Log-probabilities of the model's distribution: (chosen [B], top values [B, k], top ids [B, k])."""
    logprobs = logits.float().log_softmax(dim=-1)
    values, ids = torch.topk(logprobs, k, dim=-1) if k else (logprobs[:, :0], chosen[:, None][:, :0])
    return logprobs.gather(1, chosen[:, None])[:, 0], values, ids
