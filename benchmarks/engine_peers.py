"""The Hugging Face peer of `benchmarks.engine`, driven by the same arrival schedule.

Each runner takes the workload (prompt ids, output lengths, arrival offsets in seconds) and
returns, per request, the perf_counter time of every output token; the caller turns that into
TTFT / inter-token latency / throughput exactly as it does for our engine.
- `run_hf_static`: padded static batching with `generate`: whenever the model is idle, every
  request that has arrived (up to `batch_size`) is left-padded into one batch and run to the
  longest requested length; a request's tokens are the batch's step times for its first n_i
  tokens (the rest is the waste static batching pays for).
- `run_hf_continuous`: transformers' own continuous batching (`generate_batch`, paged sdpa), all
  requests at once, for GPU runs (benchmarks/gpu_check.py). On CPU it made 85 tokens in 150 s, so
  there a ratio against it said nothing; llama.cpp (engine_llamacpp_peer.py) is the CPU peer.
"""
from __future__ import annotations

import time
import warnings

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from backends.engine.model.model_runner import load_model


def load_sdpa_model(path):
    """The same weights as the engine, in anonymous memory (load_model does that), with sdpa."""
    model = load_model(path)
    model.set_attn_implementation("sdpa")
    return model


def sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


class StepClock(BaseStreamer):
    """generate() calls put() once with the prompt, then once per decoding step."""

    def __init__(self):
        self.times: list[float] = []
        self._seen_prompt = False

    def put(self, value):
        if self._seen_prompt:
            self.times.append(time.perf_counter())
        self._seen_prompt = True

    def end(self):
        pass


class PastDeadline(StoppingCriteria):
    """Ends the batch (every row) once the peer's time limit has passed."""

    def __init__(self, deadline: float):
        self.deadline = deadline

    def __call__(self, input_ids, scores, **kwargs):
        # on the ids' device: generate() combines it with its own flags there (CUDA runs failed on a CPU one)
        return torch.full((input_ids.shape[0],), time.perf_counter() > self.deadline, dtype=torch.bool,
                          device=input_ids.device)


@torch.inference_mode()
def _generate_batch(model, prompts: list[list[int]], max_new: int, pad_id: int,
                    deadline: float = float("inf")) -> list[float]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=model.device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=model.device)
    for row, prompt in enumerate(prompts):  # left padding: every row's last token is at the end
        ids[row, width - len(prompt):] = torch.tensor(prompt, device=model.device)
        mask[row, width - len(prompt):] = 1
    clock = StepClock()
    # min_new_tokens masks EOS, so every row runs the full length (same as ignore_eos elsewhere)
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, min_new_tokens=max_new,
                   do_sample=False, pad_token_id=pad_id, streamer=clock,
                   stopping_criteria=StoppingCriteriaList([PastDeadline(deadline)]))
    return clock.times


def run_hf_static(path, prompts, out_lens, arrivals, batch_size: int, pad_id: int, log, limit_s: float):
    """`path`: a model folder, or a model already built with sdpa attention (random weights)."""
    model = path if isinstance(path, torch.nn.Module) else load_sdpa_model(path)
    _generate_batch(model, [prompts[0][:32]], 4, pad_id)  # warm-up, not timed
    n = len(prompts)
    times: list[list[float]] = [[] for _ in range(n)]
    queue: list[int] = []
    next_arrival = 0
    start = time.perf_counter()
    deadline = start + limit_s
    while (next_arrival < n or queue) and time.perf_counter() < deadline:
        now = time.perf_counter()
        while next_arrival < n and start + arrivals[next_arrival] <= now:
            queue.append(next_arrival)
            next_arrival += 1
        if not queue:
            sleep_until(start + arrivals[next_arrival])
            continue
        batch, queue = queue[:batch_size], queue[batch_size:]
        steps = _generate_batch(model, [prompts[i] for i in batch], max(out_lens[i] for i in batch), pad_id, deadline)
        for i in batch:
            times[i] = steps[:out_lens[i]]
        log(f"hf_static: batch of {len(batch)} done at {time.perf_counter() - start:.1f}s, "
            f"{sum(1 for t in times if t)}/{n} requests started")
    cut = any(len(t) < m for t, m in zip(times, out_lens))
    return start, times, (deadline if cut else None)


def run_hf_continuous(model, prompts: list[list[int]], max_new: int) -> dict:
    """All `prompts` through `model.generate_batch`, `max_new` tokens each (EOS off); output tok/s
    from the first request's submission to the last one's end (the manager's warm-up excluded)."""
    with warnings.catch_warnings():  # transformers >= 5.20 takes "sdpa" and warns on the prefix 5.17 needs
        warnings.simplefilter("ignore", FutureWarning)
        model.set_attn_implementation("paged|sdpa")
    config = GenerationConfig(max_new_tokens=max_new, do_sample=False, eos_token_id=-1, pad_token_id=0)
    results = model.generate_batch(prompts, generation_config=config, progress_bar=False)
    done = [r for r in results.values() if r.error is None]
    if not done:
        return {"error": next((r.error for r in results.values()), "no results")}
    produced = sum(len(r.generated_tokens) for r in done)
    elapsed = max(r.lifespan[1] for r in done) - min(r.created_time for r in done)
    return {"tokens_per_s": round(produced / elapsed, 2), "output_tokens": produced, "elapsed_s": round(elapsed, 2),
            "requests": len(prompts), "failed": len(results) - len(done)}
