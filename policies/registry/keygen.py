"""A key's secret (`sk-tg-` + 32 random bytes in base62), its stable id and its visible prefix.
Only the SHA-256 of the secret is kept: with 256 random bits a plain hash is as safe as a slow one."""
from __future__ import annotations

import hashlib
import secrets

SECRET_PREFIX = "sk-tg-"
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DIGITS = 43  # 62**43 > 2**256: every 32-byte value fits, so every secret has the same length
VISIBLE = len(SECRET_PREFIX) + 4  # what listings show of a key: enough to tell keys apart by eye


def base62(data: bytes, digits: int = _DIGITS) -> str:
    value = int.from_bytes(data, "big")
    out = []
    for _ in range(digits):
        value, rest = divmod(value, 62)
        out.append(_ALPHABET[rest])
    return "".join(reversed(out))


def new_secret() -> str:
    return SECRET_PREFIX + base62(secrets.token_bytes(32))


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def digest_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def visible_prefix(secret: str) -> str:
    return secret[:VISIBLE]
