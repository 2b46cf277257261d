"""The cache salt a tenant's requests carry to the workers (`cache_salt`: ours and vLLM key their
prefix caches with it), so no tenant's time to first token shows what another sent.

It is an HMAC of the tenant's name under a secret no client sees: a tenant cannot compute, let
alone send, another's (the gateway refuses `cache_salt` from clients). The secret is
TIERGATE_CACHE_SALT_SECRET when the operator sets it (replicas behind one load balancer share it
that way), else drawn at start and handed by the launcher to every process it starts."""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets

SECRET_ENV = "TIERGATE_CACHE_SALT_SECRET"


def shared_secret() -> bytes:
    """This launch's secret; drawn once and put in the environment, which child processes inherit."""
    value = os.environ.get(SECRET_ENV)
    if not value:
        value = os.environ[SECRET_ENV] = secrets.token_hex(32)
    return value.encode()


@functools.lru_cache(maxsize=4096)
def cache_salt(tenant: str) -> str:
    return hmac.new(shared_secret(), tenant.encode(), hashlib.sha256).hexdigest()[:32]
