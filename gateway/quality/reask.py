"""Asking a tier for a sample's answer: a normal, non-streamed upstream call through the
gateway's own pools, failover and breakers (so a sample never reaches a dead worker twice),
with max_tokens capped. Samples are not billed to the tenant; they carry priority "batch".
"""
from __future__ import annotations

import dataclasses

from ..config import Config
from ..core.upstream import PATHS, Ask, Opener
from .checks import Answer
from .sample import Sample, parse_whole


class ReaskError(Exception):
    pass


def whole(body: dict) -> dict:
    """The client's body asked for as one whole answer; its max_tokens are capped where every
    tier's body is built (upstream.Ask.body_for)."""
    out = dict(body, stream=False)
    out.pop("stream_options", None)
    return out


async def ask(open_upstream: Opener, config: Config, sample: Sample, tier, max_tokens: int) -> Answer:
    route = sample.route
    # the tenant's own max_tokens cap still applies; samples wait behind interactive traffic
    route = dataclasses.replace(route, tier=tier, affinity_keys=route.keys_for(tier, config),
                                decision=dataclasses.replace(route.decision, priority="batch"))
    question = Ask(f"{sample.request_id}.quality-{tier.name}"[:128], route, PATHS[sample.kind],
                   whole(sample.body), False, max_tokens)
    opened = (await open_upstream(config, question)).answer()
    try:
        if opened.tier.name != tier.name:
            raise ReaskError(f"tier {tier.name} unavailable (failed over to {opened.tier.name})")
        if opened.response.status != 200:
            raise ReaskError(f"tier {tier.name} answered HTTP {opened.response.status}")
        return parse_whole(opened.body)
    finally:
        opened.backend.on_done()
        opened.response.release()
