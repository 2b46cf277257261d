"""Compression bombs: a small gzip or deflate body that inflates to a large JSON chat request,
built a piece at a time so that making one never holds the inflated text."""
from __future__ import annotations

import zlib

WBITS = {"gzip": 31, "deflate": 15}  # gzip framing; zlib framing (HTTP's "deflate")
PIECE = 1 << 20


def json_bomb(inflated_bytes: int, encoding: str = "gzip") -> bytes:
    """A chat completions body of about `inflated_bytes` once inflated, compressed with `encoding`."""
    head, tail = b'{"model": "auto", "messages": [{"role": "user", "content": "', b'"}]}'
    packer = zlib.compressobj(9, zlib.DEFLATED, WBITS[encoding])
    out = [packer.compress(head)]
    left = max(0, inflated_bytes - len(head) - len(tail))
    while left:
        out.append(packer.compress(b"a" * min(PIECE, left)))
        left -= min(PIECE, left)
    out.append(packer.compress(tail))
    out.append(packer.flush())
    return b"".join(out)
