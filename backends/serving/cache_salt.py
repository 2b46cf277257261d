"""The `cache_salt` body field: the prefix-cache scope the gateway sets per tenant (vLLM's field).

Only the gateway holds this worker's key, and the gateway refuses the field from its clients
(wire/parameters.py), so a salt here is the gateway's; it is bounded and taken out of the body
before the OpenAI parameters are checked."""
from __future__ import annotations

import re

from wire.errors import bad_request

CACHE_SALT = "cache_salt"
_SALT = re.compile(r"[A-Za-z0-9_-]{1,64}")


def take_cache_salt(body: dict) -> str | None:
    salt = body.pop(CACHE_SALT, None)
    if salt is None:
        return None
    if not isinstance(salt, str) or not _SALT.fullmatch(salt):
        raise bad_request("'cache_salt' must be 1 to 64 characters of letters, digits, '-' and '_'",
                          param=CACHE_SALT)
    return salt
