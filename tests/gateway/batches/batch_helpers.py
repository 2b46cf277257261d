"""Builders for the Batch API tests: JSONL files, tenants and polling a batch to its end."""
from __future__ import annotations

import json

import openai

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

KEYS = {"acme": "sk-acme-batch-key", "other": "sk-other-batch-key"}
FINAL = ("completed", "failed", "expired", "cancelled")


def batch_config(url: str, prefix: str, usage_dir, **batches) -> dict:
    """File bodies go to a `files` folder beside `usage_dir` (the test's own tmp folder)."""
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(key)}]} for name, key in KEYS.items()}
    batches.setdefault("files_dir", str(usage_dir.parent / "files"))
    return base_config([tier("small", 1, [url]), tier("large", 2, [url])], prefix, tenants=tenants,
                       policy={"usage_log": {"dir": str(usage_dir)}}, batches=batches)


def jsonl(n: int, model: str = "small", url: str = "/v1/chat/completions", **body) -> bytes:
    lines = [{"custom_id": f"req-{i}", "method": "POST", "url": url,
              "body": {"model": model, "messages": [{"role": "user", "content": f"question {i}"}], **body}}
             for i in range(n)]
    return "\n".join(json.dumps(line) for line in lines).encode() + b"\n"


def client(base_url: str, tenant: str = "acme") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEYS[tenant], max_retries=0)


async def submit(sdk: openai.AsyncOpenAI, content: bytes, endpoint: str = "/v1/chat/completions"):
    uploaded = await sdk.files.create(file=("batch.jsonl", content), purpose="batch")
    return await sdk.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")


async def until(sdk: openai.AsyncOpenAI, batch_id: str, done, timeout_s: float = 60):
    """The batch once `done(batch)` holds (polled with a deadline)."""
    async def check():
        try:
            batch = await sdk.batches.retrieve(batch_id)
        except openai.APIStatusError as err:  # 503: the store is down for a moment (chaos tests)
            if err.status_code != 503:
                raise
            return None
        return batch if done(batch) else None
    return await wait_for(check, timeout_s=timeout_s, interval_s=0.1, what=f"batch {batch_id}")


async def finished(sdk: openai.AsyncOpenAI, batch_id: str, timeout_s: float = 60):
    return await until(sdk, batch_id, lambda b: b.status in FINAL, timeout_s)


async def lines_of(sdk: openai.AsyncOpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    text = (await sdk.files.content(file_id)).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def usage_of(sdk: openai.AsyncOpenAI) -> dict:
    """The tenant's /v1/usage, polled past the documented 503 the policy answers for a moment
    after a slow or failed Redis call (a loaded machine can cause one)."""
    async def read():
        try:
            return await sdk.get("/usage", cast_to=object)
        except openai.APIStatusError as err:
            if err.status_code != 503:
                raise
            return None
    return await wait_for(read, timeout_s=15, interval_s=0.2, what="usage readable")
