"""`python -m policies tenants|keys ...`: the admin API from a shell (the gateway does the work,
so the CLI checks nothing itself and changes are audited like any other). The admin key comes
from --admin-key or TIERGATE_ADMIN_KEY; answers are printed as JSON."""
from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.parse
import urllib.request


class ApiError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status


def call(url: str, admin_key: str, method: str, path: str, body: dict | None = None,
         query: dict | None = None, timeout_s: float = 30.0) -> dict:
    query = {k: v for k, v in (query or {}).items() if v is not None}
    target = url.rstrip("/") + path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(target, data=data, method=method,
                                     headers={"Authorization": f"Bearer {admin_key}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise ApiError(exc.code, exc.read().decode("utf-8", "replace")) from None


def _json_arg(text: str | None) -> dict:
    if text is None:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


def add_commands(sub) -> None:
    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", default=os.environ.get("TIERGATE_URL", "http://127.0.0.1:8000"))
        parser.add_argument("--admin-key", default=os.environ.get("TIERGATE_ADMIN_KEY"))

    tenants = sub.add_parser("tenants", help="list, show, create, update or delete tenants through the admin API")
    t = tenants.add_subparsers(dest="action", required=True)
    common(t.add_parser("list"))
    for action in ("show", "delete"):
        common(p := t.add_parser(action))
        p.add_argument("name")
    for action in ("create", "update"):
        common(p := t.add_parser(action))
        p.add_argument("name")
        p.add_argument("--policy", help="the tenant's policy fields as JSON, e.g. '{\"max_tier\": \"small\"}'")

    keys = sub.add_parser("keys", help="list, show, create, update, rotate, revoke or delete API keys")
    k = keys.add_subparsers(dest="action", required=True)
    common(p := k.add_parser("list"))
    p.add_argument("--tenant")
    p.add_argument("--limit", type=int)
    p.add_argument("--after")
    for action in ("show", "revoke", "delete"):
        common(p := k.add_parser(action))
        p.add_argument("key_id")
    common(p := k.add_parser("create"))
    p.add_argument("tenant")
    p.add_argument("--fields", help="more key fields as JSON (owner, description, expires_in_s, rate_limits, budgets...)")
    common(p := k.add_parser("update"))
    p.add_argument("key_id")
    p.add_argument("--fields", required=True, help="the fields to change, as JSON")
    common(p := k.add_parser("rotate"))
    p.add_argument("key_id")
    p.add_argument("--grace-s", type=int, help="how long the old secret keeps working (default 24 h)")


def run(args: argparse.Namespace) -> dict:
    if not args.admin_key:
        raise ValueError("no admin key: pass --admin-key or set TIERGATE_ADMIN_KEY")
    go = lambda method, path, body=None, query=None: call(args.url, args.admin_key, method, path, body, query)  # noqa: E731
    if args.command == "tenants":
        path = "/admin/tenants" + (f"/{urllib.parse.quote(args.name)}" if args.action != "list" else "")
        return {"list": lambda: go("GET", path), "show": lambda: go("GET", path),
                "delete": lambda: go("DELETE", path),
                "create": lambda: go("POST", "/admin/tenants", {"name": args.name, "policy": _json_arg(args.policy)}),
                "update": lambda: go("PATCH", path, {"policy": _json_arg(args.policy)})}[args.action]()
    key_path = f"/admin/keys/{urllib.parse.quote(getattr(args, 'key_id', '') or '')}"
    return {"list": lambda: go("GET", "/admin/keys", query={"tenant": args.tenant, "limit": args.limit,
                                                              "after": args.after}),
            "show": lambda: go("GET", key_path), "delete": lambda: go("DELETE", key_path),
            "revoke": lambda: go("POST", key_path + "/revoke", {}),
            "create": lambda: go("POST", "/admin/keys", {"tenant": args.tenant, **_json_arg(args.fields)}),
            "update": lambda: go("PATCH", key_path, _json_arg(args.fields)),
            "rotate": lambda: go("POST", key_path + "/rotate",
                                 {} if args.grace_s is None else {"grace_s": args.grace_s})}[args.action]()
