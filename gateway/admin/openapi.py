"""OpenAPI descriptions of /admin/tenants, /admin/keys and /admin/audit, merged into
gateway.api.openapi.SPEC (every route: an admin key; a change: one with scope `write`)."""
from __future__ import annotations

from policies.registry.records import MAX_GRACE_S


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


_NULLABLE_INT = {"type": ["integer", "null"]}
_LIMITS = {"type": ["object", "null"], "properties": {"requests_per_minute": {"type": "integer", "minimum": 1},
                                                       "tokens_per_minute": {"type": "integer", "minimum": 1},
                                                       "max_concurrent_requests": {"type": "integer", "minimum": 1}}}
_BUDGET = {"type": "object", "additionalProperties": False,
           "properties": {"soft": {"type": "number", "minimum": 0}, "hard": {"type": "number", "minimum": 0}}}
_BUDGETS = {"type": ["object", "null"], "additionalProperties": False,
            "description": "The key's own budgets in USD, on top of its tenant's: a request needs room in both",
            "properties": {f"{period}_usd": _BUDGET for period in ("daily", "weekly", "monthly")}}
_KEY_FIELDS = {
    "description": {"type": ["string", "null"], "maxLength": 256},
    "owner": {"type": ["string", "null"], "maxLength": 256},
    "metadata": {"type": ["object", "null"], "maxProperties": 16,
                 "additionalProperties": {"type": "string", "maxLength": 256}},
    "expires_at": {"type": ["integer", "null"], "description": "Unix time (s) after which the key is refused"},
    "expires_in_s": {"type": "integer", "minimum": 1, "description": "Sets expires_at to now plus this"},
    "rate_limits": _LIMITS,
    "allowed_models": {"type": ["array", "null"], "maxItems": 64, "items": {"type": "string"}},
    "budgets": _BUDGETS,
}
_PAGE = [{"name": "limit", "in": "query", "required": False,
          "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}]

SCHEMAS = {
    "AdminTenant": {"type": "object", "required": ["object", "name", "source"], "properties": {
        "object": {"const": "tiergate.tenant"}, "name": {"type": "string"},
        "source": {"enum": ["config", "api"], "description": "config: defined in the YAML, which wins; "
                                                              "read-only here"},
        "policy": {"type": "object", "description": "The tenant fields of the config (config/REFERENCE.md), "
                                                    "over policy.defaults"},
        "created_at": {"type": "integer"}, "updated_at": {"type": "integer"}}},
    "AdminTenantRequest": {"type": "object", "required": ["name"], "additionalProperties": False, "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}, "policy": {"type": "object"}}},
    "AdminKey": {"type": "object", "required": ["object", "id", "tenant", "prefix"], "properties": {
        "object": {"const": "tiergate.key"}, "id": {"type": "string"}, "tenant": {"type": "string"},
        "prefix": {"type": "string", "description": "The secret's first characters, for display"},
        "secret": {"type": "string", "description": "Only in the answer of create and rotate: shown once"},
        "secrets": {"type": "array", "items": {"type": "object", "properties": {"until": _NULLABLE_INT}},
                    "description": "The valid secrets, newest first; an old one works until `until`"},
        "created_at": {"type": "integer"}, "updated_at": {"type": "integer"}, "revoked_at": _NULLABLE_INT,
        **_KEY_FIELDS}},
    "AdminKeyRequest": {"type": "object", "required": ["tenant"], "additionalProperties": False,
                        "properties": {"tenant": {"type": "string"}, **_KEY_FIELDS}},
    "AdminAlert": {"type": "object", "required": ["id", "tenant", "budget", "period", "percent", "status"],
                   "properties": {"id": {"type": "string", "description": "Also the webhook's Idempotency-Key"},
                                  "tenant": {"type": "string"},
                                  "key_id": {"type": ["string", "null"],
                                             "description": "A key's own budget; null: the tenant's"},
                                  "budget": {"enum": ["daily", "weekly", "monthly"]},
                                  "period": {"type": "string"}, "percent": {"type": "integer"},
                                  "amount_micro": {"type": "integer"}, "spend_micro": {"type": "integer"},
                                  "created_at": {"type": "number"},
                                  "status": {"enum": ["pending", "retrying", "delivered", "failed", "not_sent"]},
                                  "attempts": {"type": "integer"}, "last_error": {"type": ["string", "null"]},
                                  "delivered_at": {"type": ["number", "null"]}}},
    "AdminAuditEntry": {"type": "object", "required": ["id", "ts", "who", "action", "kind", "target"],
                        "properties": {"id": {"type": "string"}, "ts": {"type": "number"},
                                       "who": {"type": "string", "description": "The admin key's id"},
                                       "action": {"type": "string"}, "kind": {"enum": ["tenant", "key"]},
                                       "target": {"type": "string"}, "before": {"type": ["object", "null"]},
                                       "after": {"type": ["object", "null"]}}},
}


def _list(item: str) -> dict:
    return {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"}, "data": {"type": "array", "items": _ref(item)},
        "has_more": {"type": "boolean"}, "last_id": {"type": ["string", "null"]}}}


def paths(errors: dict, json) -> dict:
    err = _ref("Error")
    admin = {"400": errors["400"], "401": errors["401"],
             "403": json(err, "Not an admin key, or (for a change) an admin key of scope read"),
             "404": json(err, "No such tenant or key")}
    conflict = {"409": json(err, "Exists, changed concurrently, defined by the config, or still has keys")}

    def op(summary: str, ok: dict, body: str | None = None, extra: dict | None = None, params=()) -> dict:
        spec = {"summary": summary, "responses": {**ok, **admin, **(extra or {})}}
        if body:
            spec["requestBody"] = {"required": body != "optional", "content": {"application/json": {
                "schema": _ref(body) if body != "optional" else {"type": "object"}}}}
        if params:
            spec["parameters"] = list(params)
        return spec

    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    key_id = {"name": "key_id", "in": "path", "required": True, "schema": {"type": "string"}}
    tenant_ok = {"200": json(_ref("AdminTenant"), "The tenant")}
    key_ok = {"200": json(_ref("AdminKey"), "The key (never its secret)")}
    with_secret = json(_ref("AdminKey"), "The key with its `secret`, shown this once")
    grace = {"type": "object", "properties": {"grace_s": {"type": "integer", "minimum": 0, "maximum": MAX_GRACE_S,
                                                          "default": 86400}}}
    rotate = op("Issue a new secret for the key; the old one works for `grace_s` more (default 24 h)",
                {"200": with_secret}, None, conflict, [key_id])
    rotate["requestBody"] = {"required": False, "content": {"application/json": {"schema": grace}}}
    return {
        "/admin/tenants": {
            "get": op("Every tenant: the config's (source config) and the API's", {"200": json(
                _list("AdminTenant"), "Tenants")}),
            "post": op("Create a tenant", {"200": json(_ref("AdminTenant"), "Created")}, "AdminTenantRequest",
                       conflict)},
        "/admin/tenants/{name}": {
            "get": op("One tenant", tenant_ok, params=[name]),
            "patch": op("Change a tenant's policy fields (null removes one)", tenant_ok, "optional", conflict,
                        [name]),
            "delete": op("Delete a tenant that has no unrevoked key", {"200": json({"type": "object"}, "Deleted")},
                         None, conflict, [name])},
        "/admin/keys": {
            "get": op("API keys, by id, a page at a time", {"200": json(_list("AdminKey"), "Keys")}, params=[
                *_PAGE, {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
                {"name": "tenant", "in": "query", "required": False, "schema": {"type": "string"}}]),
            "post": op("Create a key: its secret is in this answer only", {"200": with_secret}, "AdminKeyRequest",
                       conflict)},
        "/admin/keys/{key_id}": {
            "get": op("One key", key_ok, params=[key_id]),
            "patch": op("Change a key's fields", key_ok, "optional", conflict, [key_id]),
            "delete": op("Delete a key (refused at once, like a revoked one)",
                         {"200": json({"type": "object"}, "Deleted")}, None, conflict, [key_id])},
        "/admin/keys/{key_id}/rotate": {"post": rotate},
        "/admin/keys/{key_id}/revoke": {"post": op("Revoke a key: every replica refuses it within its "
                                                   "propagation time", key_ok, None, conflict, [key_id])},
        "/admin/alerts": {"get": op("Budget alerts and their webhook delivery, newest first", {"200": json(
            _list("AdminAlert"), "Alerts")}, params=[
            *_PAGE, {"name": "before", "in": "query", "required": False, "schema": {"type": "string"},
                     "description": "An alert id: the page starts after it"}])},
        "/admin/audit": {"get": op("Admin changes, newest first, a page at a time", {"200": json(
            _list("AdminAuditEntry"), "Entries")}, params=[
            *_PAGE, {"name": "before", "in": "query", "required": False, "schema": {"type": "string"},
                     "description": "An entry id: the page starts after it"}])},
    }
