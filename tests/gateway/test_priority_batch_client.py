"""benchmarks.priority's Batch API path with the real `openai` SDK against a real gateway (a
fake upstream behind it): upload, create, poll, download, and tokens and drain time read from
the output."""
import json

from benchmarks.priority_batch import drain_via_api
from tests.gateway.batch_helpers import KEYS, batch_config

LINES = 5


async def test_a_batch_drains_through_the_batch_api_with_the_openai_sdk(fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage"))
    out = await drain_via_api(gw.url, KEYS["acme"], "small", LINES, 16, timeout_s=30)
    assert out["status"] == "completed" and out["drain_s"] >= 0
    assert (out["lines"], out["answered"], out["errors"]) == (LINES, LINES, 0)
    assert out["completion_tokens"] == fake.chunks * LINES  # what the upstream answered, read from the output
    sent = [seen["body"] for seen in fake.seen if "body" in seen]
    assert len(sent) == LINES and all(body["model"] == "model-small" and body["max_tokens"] == 16 for body in sent)  # the tier's model
