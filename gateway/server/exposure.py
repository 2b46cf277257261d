"""Secure by default: a gateway without `tenants:` has no keys, so every endpoint (the admin
ones included) is open to whoever reaches it. It may listen on a loopback address; anywhere
else it refuses to start unless the operator says `--insecure-open`, which is logged at every
start (and a reload that drops the tenants of such a gateway is rejected: state.py)."""
from __future__ import annotations

import logging

from webwire.loopback import is_loopback

from ..config import Config

log = logging.getLogger("gateway")
INSECURE_FLAG = "--insecure-open"


def open_without_keys(host: str, config: Config) -> bool:
    """Whether this gateway would serve every endpoint without a key on a reachable address."""
    return not config.policies.keyed and not is_loopback(host)


def refusal(host: str, config: Config, insecure_open: bool) -> str | None:
    """The one line to exit with, or None when the gateway may start (warning when it is open)."""
    if not open_without_keys(host, config):
        return None
    if not insecure_open:
        return (f"refusing to listen on {host or 'every address'} without `tenants:` in {config.source}: every "
                f"endpoint, admin ones included, would be open to anyone who reaches it. Configure tenants and "
                f"policy.admin_key_sha256, listen on 127.0.0.1, or pass {INSECURE_FLAG} to serve it open anyway")
    log.warning("%s: listening on %s with no tenants configured: every endpoint, admin ones included, is open "
                "to anyone who reaches it", INSECURE_FLAG, host or "every address")
    return None
