"""Tenants and API keys as data: created, changed, rotated and revoked through /admin/, stored in
Redis, followed by every replica, and recorded in an audit log they can be rebuilt from.

| module | what it is |
|---|---|
| `keygen.py` | a key's secret, id and visible prefix; the secret is shown once, only its hash is kept |
| `records.py` | an admin's request body validated into a tenant or key record (plain JSON data) |
| `store.py` | the Redis layout (one hash tag), the one write script, reads and the change feed |
| `cache.py` | each replica's copy of every record, kept current by pub/sub and a version poll |
| `audit.py` | the audit entry and its JSONL file beside the usage log |
| `admin.py` | the operations /admin/ runs: validate, write once, audit |
| `rebuild.py` | tenants and keys rebuilt into Redis from the audit logs |
"""
