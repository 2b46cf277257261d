"""One alert POSTed to the operator's receiver. The body is signed: X-Tiergate-Signature is
`sha256=` + HMAC-SHA256(secret, "<timestamp>.<body>") with X-Tiergate-Timestamp, so a receiver
can refuse forged and replayed calls; Idempotency-Key is the alert's id, the same on every retry
and from every replica, so a receiver counts each alert once."""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from policies.costs import micro_to_usd


def body_of(alert: dict) -> bytes:
    return json.dumps({"object": "tiergate.budget_alert", "id": alert["id"], "tenant": alert["tenant"],
                       "key_id": alert.get("key_id"), "budget": alert["budget"], "period": alert["period"],
                       "threshold_percent": alert["percent"], "budget_usd": micro_to_usd(alert["amount_micro"]),
                       "spend_usd": micro_to_usd(alert["spend_micro"]), "created_at": alert["created_at"]},
                      separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


async def post(session: Any, url: str, secret: str, alert: dict, timeout_s: float) -> str | None:
    """None when the receiver took it (2xx), else why not. `session`: an aiohttp.ClientSession."""
    import aiohttp  # here, not at the top: policies import without the web stack (tests/layers)

    body, timestamp = body_of(alert), str(int(time.time()))
    headers = {"Content-Type": "application/json", "Idempotency-Key": alert["id"],
               "X-Tiergate-Timestamp": timestamp, "X-Tiergate-Signature": signature(secret, timestamp, body)}
    try:
        async with session.post(url, data=body, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as answer:
            await answer.read()
            return None if 200 <= answer.status < 300 else f"HTTP {answer.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
