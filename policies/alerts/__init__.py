"""Budget alerts: when a tenant's settled spend crosses a threshold of one of its budgets
(`policy.alerts.thresholds_percent`, of the hard amount, or the soft one without a hard), one
alert per (tenant, budget, period, threshold), however many replicas and concurrent requests
cross it: the first settle to see it creates it in Redis (SET NX), the others find it there.

| module | what it is |
|---|---|
| `thresholds.py` | which thresholds a spend has reached, and each alert's deterministic id |
| `store.py` | the alerts in Redis (one hash tag): fire once, claim a due delivery under a lease, record the outcome |
| `webhook.py` | the signed POST (HMAC-SHA256 over timestamp and body; the alert id as Idempotency-Key) |
| `deliverer.py` | each replica's delivery loop: claims due deliveries, retries with backoff; a replica that died mid-delivery leaves its lease to expire and another delivers |
"""
