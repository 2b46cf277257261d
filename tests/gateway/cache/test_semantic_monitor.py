"""The quality monitor samples semantic hits like a tier's answers: a sampled hit is judged
against what its own tier answers to the prompt now, and a failed verdict raises the
similarity the tenant's next semantic hit needs (here past 1: tier zero stops serving)."""
from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from gateway.core.upstream import open_upstream
from gateway.quality.monitor import QualityMonitor
from gateway.quality.scorer import Scorer
from tests.gateway.cache.cache_helpers import ask, cache_config, numbered_upstream
from tests.support import wait_for
from tests.support.in_process import services_for

ASKED = "What currency does Kenya use?"


class TextIdentity:
    """An embedder for which only identical texts are similar (the packaged MiniLM is not needed
    to tell "answer 1" from "answer 3")."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4096), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, zlib.crc32(text.encode()) % 4096] = 1.0
        return out


async def test_a_failed_sampled_semantic_hit_raises_the_tenants_bar(redis_prefix):
    doc = cache_config(redis_prefix, tenants={"acme": {"cache": {"semantic": {"enabled": True, "failure_step": 1.0}}}})
    doc["quality"] = {"sampling_rate": 1.0}
    services = services_for(doc, numbered_upstream())
    monitor = QualityMonitor(lambda: services.config, services.router.classifiers,
                             lambda config, question: open_upstream(services.upstreams, config, question),
                             scorer=Scorer(embedder_factory=TextIdentity))
    services = replace(services, sinks=replace(services.sinks, quality=monitor))
    await monitor.start(None)
    try:
        assert (await ask(services, messages=[{"role": "user", "content": ASKED}]))[1] == "miss"
        reworded = [{"role": "user", "content": "Quick question: " + ASKED}]
        assert (await ask(services, messages=reworded))[1] == "semantic"
        bar = services.cache.semantic.bar
        await wait_for(lambda: bar.failures("acme") == 1, 30, what="the sampled hit's verdict")
        # the small tier now answers this prompt otherwise than the cached answer: the bar is past 1
        again = [{"role": "user", "content": "Please tell me: " + ASKED}]
        assert (await ask(services, messages=again))[1] == "miss"
        assert bar.failures("globex") == 0
    finally:
        await monitor.stop()
