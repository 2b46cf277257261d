"""The gateway's request path in this process, with no server on either side: the services
`gateway/core/services.py` assembles for a config dict, around a scripted transport
(tests/support/scripted_transport.py), with the real policy (Redis when the config names
tenants) and the deterministic prompt-length classifier unless a test passes another."""
from __future__ import annotations

import redis.asyncio as aioredis

from gateway.core.classify import ClassifierSlot, PromptLengthClassifier
from gateway.config import parse_config
from gateway.core.context import RequestContext
from gateway.core.policy_seam import build_policy_service
from gateway.quality.monitor import QualityMonitor
from gateway.core.request import Call
from gateway.core.services import Services, assemble
from tests.support import SHARED_REDIS


def services_for(doc: dict, transport, classifier=None, policy=None) -> Services:
    """Services for `doc`; with `tenants:` the policy keeps its ledger in the shared Redis (the
    doc's key prefix keeps tests apart), unless a test passes a `policy` of its own. The quality
    monitor is built, never started: it draws no samples."""
    config = parse_config(doc)
    slot = ClassifierSlot(classifier or PromptLengthClassifier())
    redis = aioredis.from_url(SHARED_REDIS) if config.policies.tenants else None
    quality = QualityMonitor(lambda: config, slot, None)
    return assemble(config, slot, quality, transport, policy or build_policy_service(config, redis), redis)


def chat_call(services: Services, key: str | None = None, **body) -> Call:
    """A chat request as `serve` gets it, from the tenant `key` authenticates as."""
    tenant = services.sinks.policy.authenticate(f"Bearer {key}" if key else None)
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], **body}
    return Call(RequestContext.begin({}), tenant, "chat", body)
