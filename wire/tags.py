"""Cost-attribution tags a request carries: `metadata.tags` in the body (a comma-separated
string, as OpenAI's metadata values are strings, or a list of strings) and the
`x-tiergate-tags` header (comma-separated). Bounded before anything else reads them; which of
them a tenant may use is its policy's `allowed_tags` (policies/)."""
from __future__ import annotations

import re

from .errors import bad_request

TAG = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
MAX_TAGS = 16           # per request, body and header together
MAX_HEADER_CHARS = 1024
TAGS_HEADER = "x-tiergate-tags"


def _names(value: object, param: str) -> list[str]:
    if isinstance(value, str):
        names = [t.strip() for t in value.split(",") if t.strip()]
    elif isinstance(value, list) and all(isinstance(t, str) for t in value):
        names = [t.strip() for t in value]
    else:
        raise bad_request(f"'{param}' must be a comma-separated string or a list of strings", param=param)
    bad = next((t for t in names if not TAG.match(t)), None)
    if bad is not None:
        raise bad_request(f"'{param}': tag {bad[:70]!r} must match [A-Za-z0-9_.:-]{{1,64}}", param=param)
    return names


def split_tags(body: dict, header: str | None) -> tuple[dict, tuple[str, ...]]:
    """(the body without `metadata`, the request's tags in order, each once). `metadata` may hold
    `tags` only: nothing else of it would be honoured, so anything else is refused by name."""
    if not header and "metadata" not in body:  # most requests: nothing to take out or read
        return body, ()
    names: list[str] = []
    if "metadata" in body:
        metadata = body["metadata"]
        if metadata is not None:
            if not isinstance(metadata, dict) or set(metadata) - {"tags"}:
                raise bad_request("'metadata' may only hold 'tags' (cost attribution); this server stores "
                                  "nothing else of it", param="metadata")
            names += _names(metadata.get("tags", []), "metadata.tags")
        body = {k: v for k, v in body.items() if k != "metadata"}
    if header:
        if len(header) > MAX_HEADER_CHARS:
            raise bad_request(f"'{TAGS_HEADER}' is longer than {MAX_HEADER_CHARS} characters", param=TAGS_HEADER)
        names += _names(header, TAGS_HEADER)
    tags = tuple(dict.fromkeys(names))
    if len(tags) > MAX_TAGS:
        raise bad_request(f"at most {MAX_TAGS} tags per request, got {len(tags)}", param="metadata.tags")
    return body, tags
