"""Config builders shared by the quality tests."""
from __future__ import annotations

from tests.support import SHARED_REDIS

EASY = ["Say hello.", "Hi there!", "Thanks, bye!", "What color is the sky?", "Name a fruit.",
        "Hello, how are you?", "Which continent is Kenya in?", "What is the capital of Italy?",
        "Tell me a joke.", "Quick one: which continent is Chile in"]


def step_to_leave_tier_1() -> float:
    """An adjustment step as large as the shipped threshold on P(level >= 2): one step takes that
    threshold to 0 and moves every request off tier 1, whatever the current calibration is."""
    from classifier.runtime import ComplexityClassifier
    return ComplexityClassifier.load().thresholds[2]


def two_tier_config(small_url: str, top_url: str, prefix: str, quality: dict, small_cap: int | None = None) -> dict:
    small = {"name": "small", "level": 1, "model": "m-small", "price_per_mtok": {"input": 0.1, "output": 0.2},
             "workers": [{"url": small_url}]}
    if small_cap is not None:
        small["max_tokens_cap"] = small_cap
    top = {"name": "top", "level": 4, "model": "m-top", "price_per_mtok": {"input": 10, "output": 30},
           "workers": [{"url": top_url}]}
    return {"tiers": [small, top], "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 10.0},
            "quality": quality}
