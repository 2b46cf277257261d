"""The OpenAI Batch API: files (`files.py`), batches (`store.py`), their HTTP routes (`api.py`),
and the runner that drains batches line by line through the normal request path at batch
priority (`runner.py`, `lines.py`, `pacer.py`). State lives in Redis, so a restarted gateway
resumes where the last one stopped."""
