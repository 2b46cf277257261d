"""Live stacks for the drop-in endpoints (tests/support/stack.py): the session's chat worker
(smollm2-135m) and embeddings worker (MiniLM) behind one gateway process per test module, with
tenants, a usage log and the shared Redis under a key prefix of its own."""
from __future__ import annotations

import glob
from pathlib import Path

import anthropic
import openai
import pytest

from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.e2e_stack import MODEL
from tests.support import Pending, wait_until
from tests.support.stack import Stack

KEYS = {"alpha": "sk-alpha-test", "beta": "sk-beta-test", "limited": "sk-limited-test", "frugal": "sk-frugal-test"}
ADMIN_KEY = "sk-admin-dropin-test"  # /metrics shows per-tenant series to it
DEAD_URL = "http://127.0.0.1:9"  # nothing listens on the discard port


def dropin_config(chat_url: str, embed_url: str, log_dir: Path) -> dict:
    return {
        "tiers": [{"name": "small", "level": 1, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
                   "workers": [{"url": chat_url}]}],
        "embeddings": [{"name": "minilm", "level": 1, "model": "minilm", "price_per_mtok": {"input": 0.02, "output": 0.0},
                        "workers": [{"url": embed_url}]}],
        "aliases": {"text-embedding-3-small": "minilm", "claude-sonnet-4-6": "small"},
        "redis": {"socket_timeout_s": 5},
        "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 60.0},
        "policy": {"usage_log": {"dir": str(log_dir)}, "admin_key_sha256": hash_key(ADMIN_KEY)},
        "tenants": {
            "alpha": {"keys": [{"id": "main", "sha256": hash_key(KEYS["alpha"])}]},
            "beta": {"keys": [{"id": "main", "sha256": hash_key(KEYS["beta"])}]},
            "limited": {"keys": [{"id": "main", "sha256": hash_key(KEYS["limited"])}],
                        "rate_limits": {"requests_per_minute": 2}},
            "frugal": {"keys": [{"id": "main", "sha256": hash_key(KEYS["frugal"])}],
                       # three micro-dollars: one embeddings request's reservation (1 per attempt, 3 attempts)
                       "budgets": {"daily_usd": {"hard": 0.000003}}},
        },
    }


class DropinStack(Stack):
    def usage_records(self, at_least: int = 0) -> list:
        """The usage log once it holds at_least records (settling ends just after an answer's last byte)."""
        def enough() -> list | Pending:
            records = read_records(glob.glob(str(self.tmp / "usage" / "*")))
            return records if len(records) >= at_least else Pending(len(records))

        return wait_until(enough, 10, what=f"{at_least} usage records") if at_least else enough()

    def openai(self, tenant: str = "alpha") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=KEYS[tenant], max_retries=0, timeout=120)

    def anthropic(self, tenant: str = "alpha") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=KEYS[tenant], max_retries=0, timeout=120)


def module_stack(name: str, chat: bool = True):
    """A module-scoped `stack` fixture: `stack = module_stack("responses")` in a test module. Without
    `chat` the chat tier points at a dead port (embeddings must not depend on it)."""
    @pytest.fixture(scope="module")
    def stack(tmp_path_factory, shared_worker, shared_embed_worker):
        with DropinStack(tmp_path_factory.mktemp(name), "dropin") as running:
            running.start_gateways(dropin_config(shared_worker if chat else DEAD_URL, shared_embed_worker,
                                                 running.tmp / "usage"), supervised=True)
            yield running
    return stack
