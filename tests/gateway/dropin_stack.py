"""A live stack for the drop-in endpoints: one real chat worker (smollm2-135m), one real
embeddings worker (MiniLM), and one gateway process with two tenants, a usage log and the
shared Redis under a key prefix of its own."""
from __future__ import annotations

import glob
import uuid
from pathlib import Path

import anthropic
import openai
import pytest

from launcher.group import ProcessGroup
from launcher.workers import worker_command
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.e2e_stack import MODEL, Stack, require_worker_module
from tests.support import SHARED_REDIS, Pending, free_port, wait_until

KEYS = {"alpha": "sk-alpha-test", "beta": "sk-beta-test", "limited": "sk-limited-test", "frugal": "sk-frugal-test"}
ADMIN_KEY = "sk-admin-dropin-test"  # /metrics shows per-tenant series to it


class DropinStack(Stack):  # start_gateway() and close() (stop processes, drop the Redis keys) are Stack's
    def __init__(self, tmp: Path, chat: bool = True, **sections):
        require_worker_module()
        self.group = ProcessGroup(tmp)
        self.prefix = f"tgdropin:{uuid.uuid4().hex[:8]}:"
        self.log_dir = tmp / "usage"
        try:
            embed_port = free_port()
            self.embed_url = f"http://127.0.0.1:{embed_port}"
            workers = [(self.embed_url, self.group.spawn("embed-worker", worker_command("minilm", embed_port,
                                                                                         "--task", "embed")))]
            if chat:
                chat_port = free_port()
                self.chat_url = f"http://127.0.0.1:{chat_port}"
                workers.append((self.chat_url, self.group.spawn("chat-worker", worker_command(MODEL, chat_port))))
            for url, proc in workers:
                self.group.wait_healthy(url, proc)
            chat_url = self.chat_url if chat else "http://127.0.0.1:9"  # nothing listens on the discard port
            doc = {
                "tiers": [{"name": "small", "level": 1, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
                           "workers": [{"url": chat_url}]}],
                "embeddings": [{"name": "minilm", "level": 1, "model": "minilm",
                                "price_per_mtok": {"input": 0.02, "output": 0.0},
                                "workers": [{"url": self.embed_url}]}],
                "aliases": {"text-embedding-3-small": "minilm", "claude-sonnet-4-6": "small"},
                "redis": {"url": SHARED_REDIS, "key_prefix": self.prefix, "socket_timeout_s": 5},
                "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 60.0},
                "policy": {"usage_log": {"dir": str(self.log_dir)}, "admin_key_sha256": hash_key(ADMIN_KEY)},
                "tenants": {
                    "alpha": {"keys": [{"id": "main", "sha256": hash_key(KEYS["alpha"])}]},
                    "beta": {"keys": [{"id": "main", "sha256": hash_key(KEYS["beta"])}]},
                    "limited": {"keys": [{"id": "main", "sha256": hash_key(KEYS["limited"])}],
                                "rate_limits": {"requests_per_minute": 2}},
                    "frugal": {"keys": [{"id": "main", "sha256": hash_key(KEYS["frugal"])}],
                               "budgets": {"daily_usd": {"hard": 0.000001}}},  # one micro-dollar
                },
            }
            doc.update(sections)
            self.start_gateway(tmp / "tiergate-dropin.yaml", doc)
        except BaseException:
            self.close()
            raise

    def usage_records(self, at_least: int = 0) -> list:
        """The usage log once it holds at_least records (settling ends just after an answer's last byte)."""
        def enough() -> list | Pending:
            records = read_records(glob.glob(str(self.log_dir / "*")))
            return records if len(records) >= at_least else Pending(len(records))

        return wait_until(enough, 10, what=f"{at_least} usage records") if at_least else enough()

    def openai(self, tenant: str = "alpha") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=KEYS[tenant], max_retries=0, timeout=120)

    def anthropic(self, tenant: str = "alpha") -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.url, api_key=KEYS[tenant], max_retries=0, timeout=120)


def module_stack(name: str, **kwargs):
    """A module-scoped `stack` fixture: `stack = module_stack("responses")` in a test module."""
    @pytest.fixture(scope="module")
    def stack(tmp_path_factory):
        running = DropinStack(tmp_path_factory.mktemp(name), **kwargs)
        yield running
        running.close()
    return stack
