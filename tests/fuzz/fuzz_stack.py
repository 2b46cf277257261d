"""The fuzz tests' live stacks (tests/support/stack.py): a real gateway process with two tenants,
`fuzz` (no practical limit) and `noisy` (a request rate it will spend), in front of either one
fake-upstream process or two real SmolLM2 workers (one per tier: hostile input that must reach
real engines, and the flood test). The gateway's output goes to a file so tests can read its logs
(keys must never appear). Requests go out with http.client: arbitrary bytes and headers."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from policies.keys import hash_key
from tests.support.stack import Response, Stack

ROOT = Path(__file__).parents[2]
ADMIN_KEY = "sk-admin-" + uuid.uuid4().hex
TENANT_KEY = "sk-tenant-" + uuid.uuid4().hex
NOISY_KEY = "sk-noisy-" + uuid.uuid4().hex
NOISY_RPM = 200
BODY_LIMIT = 256 * 1024
MODEL = "smollm2-135m"
TIERS = ("small", "large")
CONTEXT = 1024


def fuzz_config(tiers: list[tuple[str, str]], log_dir: Path, read_s: float, **sections) -> dict:
    """tiers: (model, worker URL) of `small` and `large`."""
    unlimited = {"requests_per_minute": 100000, "tokens_per_minute": 10**9}
    return {"tiers": [{"name": name, "level": level, "model": model, "price_per_mtok": {"input": 0.1, "output": 0.2},
                       "workers": [{"url": url}]} for level, (name, (model, url)) in enumerate(zip(TIERS, tiers), 1)],
            "timeouts": {"connect_s": 1.0, "read_s": read_s}, "limits": {"max_body_bytes": BODY_LIMIT},
            "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": str(log_dir)},
                       "defaults": {"rate_limits": unlimited}},
            "tenants": {"fuzz": {"keys": [{"id": "main", "sha256": hash_key(TENANT_KEY)}]},
                        "noisy": {"keys": [{"id": "main", "sha256": hash_key(NOISY_KEY)}],
                                  "rate_limits": {"requests_per_minute": NOISY_RPM, "tokens_per_minute": 10**9}}},
            **sections}


class FuzzStack(Stack):
    worker_urls: list[str]  # a worker stack's, in tier order

    def post_json(self, path: str, doc, key: str | None = TENANT_KEY, **headers) -> Response:
        if key:
            headers["Authorization"] = f"Bearer {key}"
        headers.setdefault("Content-Type", "application/json")
        return self.request("POST", path, json.dumps(doc).encode(), headers)

    def healthy(self) -> bool:
        return self.gateways[0].poll() is None and self.request("GET", "/health").status == 200

    def logs(self) -> str:
        """Everything the gateway process has printed (keys must never appear there)."""
        return self.gateway_log()

    def worker_request(self, index: int, body: bytes, timeout: float = 60.0) -> Response:
        """POST body straight to worker `index`'s chat endpoint (the worker's own boundary). The timeout
        matches the gateway's read timeout: a 128-token structured answer on a loaded CI core is slow."""
        return self.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"},
                            timeout=timeout, url=self.worker_urls[index])

    def breakers(self) -> dict:
        """Each worker's health and breaker as the gateway sees them (the admin key's view of /health)."""
        return self.request("GET", "/health", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()["backends"]

    def all_closed(self) -> bool:
        return all(b["healthy"] and b["breaker"] == "closed" for b in self.breakers().values())


def fake_upstream_stack(tmp: Path) -> FuzzStack:
    stack = FuzzStack(tmp, "fuzz")
    upstream, = stack.start_upstreams()
    stack.start_gateways(fuzz_config([("m-small", upstream), ("m-large", upstream)], tmp / "usage", 5.0))
    return stack


def worker_stack(tmp: Path) -> FuzzStack:
    stack = FuzzStack(tmp, "fuzzw")
    stack.worker_urls = stack.start_workers(MODEL, len(TIERS), "--kv-cache-gb", "0.25",
                                            "--max-model-len", str(CONTEXT))
    stack.start_gateways(fuzz_config([(MODEL, url) for url in stack.worker_urls], tmp / "usage", 60.0,
                                     health={"interval_s": 0.5, "timeout_s": 2.0}))
    return stack


def assert_openai_error(response: Response, *statuses: int) -> dict:
    """A 4xx (one of statuses when given) with exactly the OpenAI error body."""
    assert 400 <= response.status < 500, (response.status, response.body[:500])
    if statuses:
        assert response.status in statuses, (response.status, response.body[:500])
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
    return error
