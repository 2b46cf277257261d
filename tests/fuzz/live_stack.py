"""A real gateway process (`python -m gateway.serve`) in front of a real fake-upstream process,
with tenants configured, on loopback ports and the shared Redis under a unique prefix.

The gateway's stdout+stderr go to a file so tests can read its logs (keys must never appear).
Requests are sent with http.client so a test can put arbitrary bytes and headers on the wire.
"""
from __future__ import annotations

import http.client
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from policies.keys import hash_key
from launcher import commands
from launcher.group import ProcessGroup
from tests.support import SHARED_REDIS, delete_prefix, free_port

ROOT = Path(__file__).parents[2]
ADMIN_KEY = "sk-admin-" + uuid.uuid4().hex
TENANT_KEY = "sk-tenant-" + uuid.uuid4().hex
BODY_LIMIT = 256 * 1024




def gateway_config(upstream: str, prefix: str, log_dir: str) -> dict:
    tiers = [{"name": name, "level": level, "model": f"m-{name}", "price_per_mtok": {"input": 0.1, "output": 0.2},
              "workers": [{"url": upstream}]} for level, name in ((1, "small"), (2, "large"))]
    return {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "timeouts": {"connect_s": 1.0, "read_s": 5.0}, "limits": {"max_body_bytes": BODY_LIMIT},
            "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": log_dir},
                       "defaults": {"rate_limits": {"requests_per_minute": 100000, "tokens_per_minute": 10**9}}},
            "tenants": {"fuzz": {"keys": [{"id": "main", "sha256": hash_key(TENANT_KEY)}]}}}


@dataclass
class Response:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


class LiveStack:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.prefix = f"tgfuzz:{uuid.uuid4().hex[:10]}:"
        self.group = ProcessGroup(tmp)
        self.port = free_port()

    def start(self) -> "LiveStack":
        up_port = free_port()
        self.group.spawn("upstream", commands.fake_upstream(up_port))
        config = self.tmp / "tiergate.yaml"
        config.write_text(yaml.safe_dump(gateway_config(f"http://127.0.0.1:{up_port}", self.prefix,
                                                        str(self.tmp / "usage"))))
        self.gateway = self.group.spawn("gateway", commands.gateway_serve(config, self.port))
        self.group.wait_port(up_port, 30)
        self.group.wait_port(self.port, 30)
        return self

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 15.0, port: int | None = None) -> Response:
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            answer = conn.getresponse()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
        finally:
            conn.close()

    def post_json(self, path: str, doc, key: str | None = TENANT_KEY, **headers) -> Response:
        if key:
            headers["Authorization"] = f"Bearer {key}"
        headers.setdefault("Content-Type", "application/json")
        return self.request("POST", path, json.dumps(doc).encode(), headers)

    def healthy(self) -> bool:
        return self.gateway.poll() is None and self.request("GET", "/health").status == 200

    def logs(self) -> str:
        """Everything the gateway process has printed (keys must never appear there)."""
        return self.group.log_text("gateway")

    def stop(self) -> None:
        self.group.stop()
        delete_prefix(self.prefix)


def assert_openai_error(response: Response, *statuses: int) -> dict:
    """A 4xx (one of statuses when given) with exactly the OpenAI error body."""
    assert 400 <= response.status < 500, (response.status, response.body[:500])
    if statuses:
        assert response.status in statuses, (response.status, response.body[:500])
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
    return error
