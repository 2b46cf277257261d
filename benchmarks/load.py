"""Load generators for HTTP benchmarks: wrk (efficient, when installed) or an aiohttp loop."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import tempfile
import time

import aiohttp


def wrk_rps(url: str, body: str, headers: dict, seconds: float, connections: int = 64) -> float:
    """Requests/s from wrk (1 thread: the gateway gets the other core), non-2xx counted as failure."""
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}",
             'wrk.headers["Content-Type"] = "application/json"']
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines) + "\n")
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", script.name, url],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


async def closed_loop_rps(url: str, body: dict, headers: dict, seconds: float, concurrency: int = 64) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(session):
        nonlocal done
        while time.perf_counter() < deadline:
            async with session.post(url, json=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
            done += 1

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


if __name__ == "__main__":  # `python -m benchmarks.load`: the open-loop load generator
    from benchmarks.open_loop import main
    main()
