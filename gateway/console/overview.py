"""The overview: traffic, spend and savings per tier, why requests got their tier, errors.

Totals are this gateway's /metrics (all its processes), read the same way Prometheus would,
so the console and /metrics agree to the last request. The per-minute series come from the
activity rollup in Redis (every process and replica). The ledger part is /v1/usage's own
figure for today, when tenants are configured.
"""
from __future__ import annotations

from datetime import datetime, timezone

from ..core import metrics
from . import promtext

WINDOW_MINUTES = 60


def metric_totals(found) -> dict:
    requests_by_status = promtext.by_label(found, "tiergate_requests_total", "status")
    answered = sum(requests_by_status.values())
    errors_4xx = sum(v for s, v in requests_by_status.items() if s.startswith("4"))
    errors_5xx = sum(v for s, v in requests_by_status.items() if s.startswith("5"))
    tokens = {}
    for direction in ("in", "out"):
        for tier, v in promtext.by_label(found, "tiergate_tokens_total", "tier", direction=direction).items():
            tokens.setdefault(tier, {"in": 0, "out": 0})[direction] = int(v)
    return {
        "requests": int(answered),
        "served_by_tier": {t: int(v) for t, v in promtext.by_label(found, "tiergate_routed_requests_total", "tier").items()},
        "served_by_reason": {r: int(v) for r, v in promtext.by_label(found, "tiergate_routed_requests_total", "reason").items()},
        "tokens_by_tier": tokens,
        "spend_usd": promtext.total(found, "tiergate_cost_usd_total"),
        "saved_usd": promtext.total(found, "tiergate_cost_saved_usd_total"),
        "top_tier_usd": promtext.total(found, "tiergate_cost_top_tier_usd_total"),
        "errors_4xx": int(errors_4xx),
        "errors_5xx": int(errors_5xx),
        "error_rate": round((errors_4xx + errors_5xx) / answered, 4) if answered else 0.0,
    }


def per_minute(tiers: list[str], stamps: list[int], minutes: list[dict[str, int]]) -> dict:
    def series(field: str, tier: str, scale: float = 1.0) -> list[float]:
        return [m.get(f"{field}:{tier}", 0) * scale for m in minutes]

    reasons = sorted({k[4:] for m in minutes for k in m if k.startswith("why:")})
    return {
        "minutes": [s * 60 for s in stamps],  # unix seconds at each minute's start
        "requests": {t: series("n", t) for t in tiers},
        "tokens": {t: [a + b for a, b in zip(series("in", t), series("out", t))] for t in tiers},
        "spend_usd": [sum(m.get(f"cost:{t}", 0) for t in tiers) / 1e6 for m in minutes],
        "saved_usd": [sum(m.get(f"saved:{t}", 0) for t in tiers) / 1e6 for m in minutes],
        "reasons": {r: [m.get(f"why:{r}", 0) for m in minutes] for r in reasons},
        "upstream_failures": [m.get("err", 0) for m in minutes],
    }


async def ledger_today(policy, admin) -> dict | None:
    """Today's spend per tenant from the ledger (what /v1/usage reports), or None without tenants."""
    if not hasattr(policy, "usage"):
        return None
    report = await policy.usage(admin, days=1)
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    tenants = {}
    for entry in report["data"]:
        day = next((d for d in entry["days"] if d["date"] == today), None)
        tenants[entry["tenant"]] = day["spend_usd"] if day else 0.0
    return {"date": today, "spend_usd_by_tenant": tenants, "spend_usd": round(sum(tenants.values()), 6)}


async def overview(services, admin) -> dict:
    config = services.config
    found = promtext.samples(metrics.render()[0].decode())
    tiers = [t.name for t in (*config.tiers, *config.embedding_tiers)]
    body = {"object": "tiergate.console.overview", "tiers": tiers, "totals": metric_totals(found),
            "top_tier": max(config.tiers, key=lambda t: t.level).name, "per_minute": None, "ledger": None}
    if services.sinks.activity.enabled:
        stamps, minutes = await services.sinks.activity.minutes(WINDOW_MINUTES)
        body["per_minute"] = per_minute(tiers, stamps, minutes)
    if getattr(admin, "is_admin", False):
        body["ledger"] = await ledger_today(services.sinks.policy, admin)
    return body
