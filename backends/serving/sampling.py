"""A validated request's settings into the engine's SamplingParams, one per choice."""
from __future__ import annotations

from dataclasses import replace

from backends.engine.structured.output_shape import OutputShape
from backends.engine.core.sequence import INTERACTIVE, SamplingParams
from wire.requests import GenerationParams

from .generation_defaults import setting


def engine_sampling(params: GenerationParams, defaults: dict, max_tokens: int, grammar: str | None,
                    shape: OutputShape | None = None, priority: str = INTERACTIVE,
                    cache_salt: str | None = None) -> SamplingParams:
    surface = params.surface
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=setting("temperature", params.temperature, defaults),
        top_p=setting("top_p", params.top_p, defaults) or 1.0,
        top_k=setting("top_k", params.top_k, defaults) or 0,
        seed=params.seed,
        stop_token_ids=params.stop_token_ids,
        ignore_eos=params.ignore_eos,
        presence_penalty=surface.presence_penalty,
        frequency_penalty=surface.frequency_penalty,
        repetition_penalty=setting("repetition_penalty", surface.repetition_penalty, defaults),
        logit_bias=surface.logit_bias,
        logprobs=surface.top_logprobs if surface.logprobs else None,
        grammar=grammar,
        shape=shape,
        priority=priority,
        cache_salt=cache_salt,
    )


def per_choice(sampling: SamplingParams, n: int) -> list[SamplingParams]:
    """n copies; a seeded request gives copy i the seed + i, so the choices differ but replay."""
    if sampling.seed is None:
        return [sampling] * n
    return [replace(sampling, seed=sampling.seed + i) for i in range(n)]
