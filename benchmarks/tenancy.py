"""What one tenant's key can take beyond its policy, measured as a client would, in one run.

`python -m benchmarks.tenancy` runs each part on loopback (a gateway with tenants, fake upstreams,
a private Redis where the part needs one) and prints one JSON object as its last line:
- money (tenancy_money.py): hard-budget overshoot at 200-way concurrency as a ratio of one
  request's reservation, free requests (a replayed x-request-id served but not billed), and
  what reserving at admission adds to admit's p50;
- climbs (tenancy_climbs.py): requests served by a tier outside the tenant's allowed tiers;
- bomb (tenancy_bomb.py): peak RSS growth of a gateway process for a gzip bomb, with and
  without a key, against its body limit;
- billing (tenancy_billing.py): hard-budget overshoot under tool-call, tool-definition and emoji
  prompts (in reservations), free tokens (generated minus billed) across answers that time out
  while generating, cut streams, cancelled answers and batch lines run again, and the requests a
  tenant at its hard budget gets admitted while holding a stream past its reservation's lifetime;
- quality (tenancy_quality.py): how many points a tenant whose answers all fail, at ten times
  another's volume, moves the other's tier mix on replay through the quality monitor;
- probe (tenancy_probe.py): whether a tenant can tell a prefix another tenant sent from an unseen
  one through /v1/route, `x-tiergate-backend` or the time to first token (a real smollm2-135m
  worker), with `affinity.scope` tenant and global;
- batch_redis (tenancy_batch_redis.py): the peak memory Redis spends on the gateway's keys while
  a batch of 1 MB answers runs, for a tenant with `storage.files_bytes` 1 MiB (the batch fails
  at the quota) and one with room (it completes), with the files kept against the quota;
- slowloris (tenancy_slowloris.py): well-behaved clients' p50/p99 latency on a quiet gateway and
  while one client holds 200 connections sending their headers a byte a second, and how many of
  those the gateway closed within `limits.header_read_timeout_s`.
"""
from __future__ import annotations

import json
import time

from benchmarks import (tenancy_batch_redis, tenancy_billing, tenancy_bomb, tenancy_climbs, tenancy_money,
                        tenancy_probe, tenancy_quality, tenancy_slowloris)

PARTS = {"money": tenancy_money, "climbs": tenancy_climbs, "bomb": tenancy_bomb, "billing": tenancy_billing,
         "quality": tenancy_quality, "probe": tenancy_probe,
         "batch_redis": tenancy_batch_redis, "slowloris": tenancy_slowloris}


def main() -> None:
    results: dict = {}
    for name, part in PARTS.items():
        started = time.perf_counter()
        print(f"[tenancy] {name} ...", flush=True)
        results[name] = part.measure()
        print(f"[tenancy] {name}: {time.perf_counter() - started:.1f} s", flush=True)
    print(json.dumps(results, separators=(",", ":")))


if __name__ == "__main__":
    main()
