"""Removing a test's own key prefix from the shared Redis with an asyncio client."""
from __future__ import annotations


async def delete_prefix_async(client, prefix: str) -> None:
    keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
    for i in range(0, len(keys), 500):
        await client.delete(*keys[i:i + 500])
