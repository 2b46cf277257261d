"""An in-process gateway with two keyed tenants on the shared Redis (a key prefix of its own,
deleted after), for the tenancy parts that watch what one tenant can learn of, or do to, another."""
from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import yaml

from launcher.processes import SHARED_REDIS, delete_prefix
from policies.keys import hash_key

ADMIN_KEY = "sk-tenancy-admin"
KEYS = {"alpha": "sk-tenancy-alpha", "beta": "sk-tenancy-beta"}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY if name == 'admin' else KEYS[name]}"}


def tier(name: str, level: int, urls: list[str], **more) -> dict:
    return {"name": name, "level": level, "model": more.pop("model", f"model-{name}"),
            "price_per_mtok": {"input": 1.0, "output": 2.0}, "workers": [{"url": u} for u in urls], **more}


@contextlib.asynccontextmanager
async def tenant_gateway(workdir: Path, tiers: list[dict], classifier=None, **sections):
    """(base URL, GatewayState) of a gateway in front of `tiers` with tenants alpha and beta."""
    from gateway.app import build_app, start_site
    from gateway.config import load_config
    from gateway.state import GatewayState

    prefix = f"tgbench-tenancy:{uuid.uuid4().hex[:8]}:"
    doc = {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
           "health": {"interval_s": 0.5, "timeout_s": 2.0}, "timeouts": {"connect_s": 2.0, "read_s": 60.0},
           "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": str(workdir / "usage")},
                      "defaults": {"rate_limits": {"requests_per_minute": 10**6, "tokens_per_minute": 10**9}}},
           "tenants": {name: {"keys": [{"id": "k", "sha256": hash_key(key)}]} for name, key in KEYS.items()},
           **sections}
    path = workdir / f"gateway-{prefix.rsplit(':', 2)[1]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    state = GatewayState(load_config(path), str(path), **({"classifier": classifier} if classifier else {}))
    runner = await start_site(build_app(state), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", state
    finally:
        await runner.cleanup()
        delete_prefix(prefix)
