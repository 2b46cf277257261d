"""`GET /v1/quality` (summary of recent samples per tier), `POST /admin/classifier/reload` and
`POST /admin/router/outcomes` (an outcome file for the routing models: classifier/outcomes.py).

Both need the admin key when policies (tenants) are configured. With the open policy (no
keys at all) the gateway has no notion of an administrator, so both are open, like every
other endpoint of such a gateway: run it only on a trusted network.
"""
from __future__ import annotations

import asyncio
import json
from collections import Counter

from aiohttp import web

from wire.errors import OpenAIError

from ..admin.view import require_admin
from ..core.body import read_bytes
from ..core.services import SERVICES
from .hotswap import version_of
from .monitor import top_tier

RECENT = 500  # samples read for the summary


def _tier_summary(rows: list[dict]) -> dict:
    sims = [float(r["similarity"]) for r in rows if r.get("similarity")]
    checks = Counter(c for r in rows for c in r.get("checks_failed", "").split(",") if c)
    failed = sum(r.get("verdict") == "fail" for r in rows)
    return {"samples": len(rows), "failed": failed, "failure_rate": round(failed / len(rows), 4) if rows else None,
            "mean_similarity": round(sum(sims) / len(sims), 4) if sims else None, "checks_failed": dict(checks)}


async def quality(request: web.Request) -> web.Response:
    services = request[SERVICES]
    require_admin(request, services)
    monitor, config = services.sinks.quality, services.config
    body = {"object": "tiergate.quality", "enabled": monitor.config.enabled,
            "sampling_rate": monitor.config.sampling_rate, "top_tier": top_tier(config).name,
            "local_counts": dict(monitor.counts), "queue_depth": monitor.queue.qsize() if monitor.queue else 0,
            **monitor.controller.as_view(),
            "classifier": {"name": services.router.classifiers.current.name,
                           "version": version_of(services.router.classifiers.current), "swaps": monitor.swapper.history},
            "router": monitor.learner.status(), "cascade": monitor.cascade.status(),
            "tiers": {}, "classes": {}, "changes": []}
    store = monitor.store
    if store is None:
        body["storage"] = "none (no Redis configured)"
        return web.json_response(body)
    try:
        recent = await store.recent_samples(RECENT)
        steps = await store.steps()
        for tier in config.tiers:
            if tier.level >= top_tier(config).level:
                continue
            failures, size = await store.window(store.keys["tier"] + tier.name)
            body["tiers"][tier.name] = {
                "window": {"samples": size, "failed": failures,
                           "failure_rate": round(failures / size, 4) if size else None},
                "adjustment_steps": max((s.get(tier.name, 0) for s in steps.values()), default=0),
                "adjustment_steps_by_tenant": {t: s[tier.name] for t, s in steps.items() if s.get(tier.name)},
                "recent": _tier_summary([r for r in recent if r.get("tier") == tier.name])}
        for level in (1, 2, 3, 4):
            failures, size = await store.window(store.keys["class"] + str(level))
            if size:
                body["classes"][str(level)] = {"samples": size, "failed": failures,
                                               "failure_rate": round(failures / size, 4)}
        body["changes"] = await store.recent_changes(20)
    except OpenAIError:
        raise
    except Exception as exc:
        raise OpenAIError(503, f"quality store unavailable: {type(exc).__name__}", code="store_unavailable") from None
    return web.json_response(body, dumps=lambda o: json.dumps(o, separators=(",", ":")))


async def reload_classifier(request: web.Request) -> web.Response:
    services = request[SERVICES]
    require_admin(request, services)
    try:
        event = await services.sinks.quality.swapper.reload("admin endpoint")
    except Exception as exc:
        raise OpenAIError(422, f"the model could not be loaded, the running one is kept: {type(exc).__name__}: {exc}",
                          code="model_rejected") from None
    return web.json_response({"object": "tiergate.classifier_reload", **event})


def _outcome_tenant(services, name: str | None) -> str:
    """The tenant an upload's outcomes belong to ("": the operator's, read by every tenant's routing)."""
    if name is None:
        return ""
    keyring = getattr(services.sinks.policy, "keyring", None)
    names = (keyring.tenant_names() if keyring is not None else list(services.config.policies.tenants)) or \
        ["anonymous"]  # the open policy's one tenant (gateway/core/policy_seam.py)
    if name not in names:
        raise OpenAIError(404, f"no tenant {name[:64]!r}", param="tenant", code="not_found")
    return name


async def upload_outcomes(request: web.Request) -> web.Response:
    """JSONL outcome lines; `?heldout_share=` overrides the configured share held out of them (0:
    learn from every line, judge on what is already held out); `?tenant=` makes them that tenant's
    own (its requests alone read them as nearest outcomes). The guard decides before this answers."""
    from classifier.outcomes import parse_line

    services = request[SERVICES]
    require_admin(request, services)
    monitor, limit = services.sinks.quality, services.config.limits.max_body_bytes
    raw = await read_bytes(request, limit)
    try:
        share = float(request.query.get("heldout_share", monitor.config.heldout_share))
        if not 0 <= share <= 1:
            raise ValueError
    except ValueError:
        raise OpenAIError(400, "heldout_share must be a number from 0 to 1", param="heldout_share") from None
    tenant = _outcome_tenant(services, request.query.get("tenant"))

    def read_entries() -> list:  # features and the classifier for every line: off the event loop
        entries = []
        for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if line.strip():
                entry = monitor.learner.entry(*parse_line(json.loads(line), f"line {n}"), share, tenant)
                if entry is None:
                    raise OpenAIError(409, "the classifier in use is a rule without features: nothing to learn on",
                                      code="no_model")
                entries.append(entry)
        return entries

    try:
        entries = await asyncio.get_running_loop().run_in_executor(None, read_entries)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpenAIError(400, f"not an outcome file: {exc}", code="invalid_outcomes") from None
    if not entries:
        raise OpenAIError(400, "the outcome file has no lines", code="invalid_outcomes")
    learner = monitor.learner
    decisions = lambda: learner.counts["swapped"] + learner.counts["refused"]  # noqa: E731
    before = decisions()
    try:
        await monitor.learner.add(entries, "upload")
        await monitor.learner.poll()
    except Exception as exc:
        raise OpenAIError(503, f"outcome store unavailable: {type(exc).__name__}", code="store_unavailable") from None
    new = decisions() - before
    decided = list(learner.history)[-new:] if new else []
    return web.json_response({"object": "tiergate.router_outcomes", "lines": len(entries),
                              "heldout": sum(e.heldout for e in entries), "decisions": decided,
                              "router": monitor.learner.status()})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/quality", quality)
    app.router.add_post("/admin/classifier/reload", reload_classifier)
    app.router.add_post("/admin/router/outcomes", upload_outcomes)
