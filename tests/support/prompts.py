"""Token-id prompts for engine tests, the same for a seed on every run."""
from __future__ import annotations

import random


def random_prompts(count: int, vocab: int, shared_prefix: int, seed: int = 0,
                   max_body: int = 120) -> list[list[int]]:
    """Random bodies of 8 to max_body tokens; every other prompt starts with one shared prefix,
    so the prefix cache is exercised too."""
    rng = random.Random(seed)
    prefix = [rng.randrange(vocab) for _ in range(shared_prefix)]
    bodies = [[rng.randrange(vocab) for _ in range(rng.randint(8, max_body))] for _ in range(count)]
    return [prefix + body if i % 2 == 0 else body for i, body in enumerate(bodies)]


def repetitive_prompts(count: int, seed: int = 0, vocab: int = 512) -> list[list[int]]:
    """Prompts that repeat a span three times, so n-gram lookup finds real drafts."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        span = [rng.randrange(vocab) for _ in range(rng.randint(10, 30))]
        prompts.append(span * 3 + [rng.randrange(vocab) for _ in range(rng.randint(1, 15))])
    return prompts
