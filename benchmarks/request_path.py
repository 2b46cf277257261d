"""How much of the gateway one `model: "auto"` chat completion runs through, from the handler
to the upstream socket and back: `python -m benchmarks.request_path`.

One gateway in this process (tenants on, a Redis ledger, the prompt-length classifier) in
front of a fake upstream; a profiler records every Python call made in `gateway/` while one
request is answered (after a first one has warmed the caches). Prints the files, the calls
per file, and `serve`'s parameter count; one JSON object on the last line. Runs on any commit
that has `gateway.app.build_app` and `gateway.state.GatewayState`, to compare two."""
from __future__ import annotations

import asyncio
import inspect
import json
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = str(ROOT / "gateway") + "/"
KEY = "sk-request-path-" + uuid.uuid4().hex


async def _measure() -> dict:
    from gateway.api import handlers
    from gateway.app import build_app, start_site
    from gateway.core.classify import PromptLengthClassifier
    from gateway.config import load_config
    from gateway.state import GatewayState
    from launcher.fake_upstream import start_fake
    from launcher.processes import SHARED_REDIS
    from policies.keys import hash_key

    _, fake_runner, url = await start_fake(name="path")
    prefix = f"reqpath:{uuid.uuid4().hex[:8]}:"
    doc = {"tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 1, "output": 2},
                      "workers": [{"url": url}]}],
           "redis": {"url": SHARED_REDIS, "key_prefix": prefix}, "health": {"interval_s": 3600},
           "tenants": {"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gateway.yaml"
        path.write_text(yaml.safe_dump(doc))
        state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
        runner = await start_site(build_app(state), "127.0.0.1", 0)
        base = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/chat/completions"
        body = {"model": "auto", "messages": [{"role": "user", "content": "hello there"}]}
        calls: Counter = Counter()

        def profile(frame, event, arg):
            if event == "call" and frame.f_code.co_filename.startswith(GATEWAY):
                calls[(frame.f_code.co_filename[len(GATEWAY):], frame.f_code.co_name)] += 1

        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {KEY}"}) as http:
            for profiled in (False, True):
                sys.setprofile(profile if profiled else None)
                async with http.post(base, json=body) as response:
                    await response.read()
                sys.setprofile(None)
                assert response.status == 200, response.status
        await runner.cleanup()
        await fake_runner.cleanup()
    files = Counter()
    for (file, _), n in calls.items():
        files[file] += n
    serve_params = len(inspect.signature(handlers.serve).parameters)
    return {"metric": "request_path", "files": len(files), "functions": len(calls), "calls": sum(calls.values()),
            "serve_params": serve_params, "calls_by_file": dict(sorted(files.items())),
            "calls_by_function": {f"{file}:{name}": n for (file, name), n in sorted(calls.items())}}


def main() -> None:
    result = asyncio.run(_measure())
    for function, n in result.pop("calls_by_function").items():
        print(f"{n:5d}  gateway/{function}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
