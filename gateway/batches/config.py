"""The `batches:` section: the OpenAI Batch API's limits and how fast batches drain."""
from __future__ import annotations

from dataclasses import dataclass

from typedconfig import setting


@dataclass(frozen=True)
class BatchesConfig:
    enabled: bool = setting(True, "Serve /v1/files and /v1/batches (needs Redis, where file metadata and "
                                  "batch state live).")
    files_dir: str = setting(".cache/tiergate-files", "Folder of file bodies (uploads, batch inputs and "
                                                      "results; Redis keeps only their metadata), relative to "
                                                      "the working directory unless absolute. Gateway replicas "
                                                      "share it (a volume in k8s).")
    max_file_bytes: int = setting(32 << 20, "Largest uploaded file; refused with 413 as it arrives. A batch "
                                            "input is parsed whole, so this bounds that memory too.",
                                  minimum=1024, maximum=64 << 20)
    max_lines: int = setting(50_000, "Most requests in one batch input file.", minimum=1)
    max_line_bytes: int = setting(1 << 20, "Largest line of a batch input file.", minimum=256)
    max_active_per_tenant: int = setting(16, "Unfinished batches a tenant may have at once; past it, "
                                             "creating one is a 429.", minimum=1)
    max_completion_window_h: int = setting(24, "Longest completion_window accepted, in hours ('24h' is "
                                               "OpenAI's only value). Lines still undone when it ends fail "
                                               "with batch_expired.", minimum=1)
    max_in_flight_per_worker: int = setting(4, "Batch lines in flight per healthy worker of the tier they "
                                               "route to: what keeps interactive latency within its targets "
                                               "while a batch drains (workers also schedule them last).",
                                            minimum=1)
    max_in_flight: int = setting(64, "Batch lines in flight in all, across tiers.", minimum=1)
    retry_after_s: float = setting(2.0, "Wait before retrying a line that met a rate limit, an exhausted "
                                        "budget or no worker (unless the answer says how long).", above=0)
    lease_s: float = setting(10.0, "One gateway process drains batches, holding a lease in Redis that it "
                                   "renews; when it dies, another takes over after this long.", above=0)
    file_ttl_days: int = setting(30, "How long uploaded files and batch results are kept.", minimum=1)
