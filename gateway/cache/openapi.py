"""OpenAPI descriptions of /admin/cache and /admin/cache/clear (cache/admin.py), merged into
gateway.api.openapi.SPEC."""
from __future__ import annotations

SCHEMAS = {
    "CacheClearRequest": {"type": "object", "additionalProperties": False, "properties": {
        "tenant": {"type": "string", "description": "Only this tenant's cache (its shared group's, if in one)"},
        "tier": {"type": "string", "description": "Only the entries of this tier"}}},
    "CacheClear": {"type": "object", "required": ["cleared", "scopes"], "properties": {
        "cleared": {"type": "integer", "minimum": 0}, "scopes": {"type": "array", "items": {"type": "string"}},
        "tier": {"type": ["string", "null"]}}},
    "CacheHoldings": {"type": "object", "required": ["caches"], "properties": {"caches": {
        "type": "object", "additionalProperties": {"type": "object", "properties": {
            "entries": {"type": "integer"}, "bytes": {"type": "integer"}}}}}},
}


def paths(errors: dict, json) -> dict:
    admin = {"401": errors["401"], "403": json({"$ref": "#/components/schemas/Error"},
                                               "Not an admin key, or (to clear) an admin key of scope read"),
             "404": json({"$ref": "#/components/schemas/Error"}, "No such tenant, or no Redis configured")}
    tenant = {"name": "tenant", "in": "query", "required": False, "schema": {"type": "string"}}
    return {
        "/admin/cache": {"get": {"summary": "Entries and bytes held by each tenant's response cache",
                                 "parameters": [tenant], "responses": {
                                     "200": json({"$ref": "#/components/schemas/CacheHoldings"}, "Per cache"),
                                     **admin}}},
        "/admin/cache/clear": {"post": {
            "summary": "Empty a tenant's response cache (or every tenant's), whole or one tier's entries",
            "requestBody": {"required": False, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/CacheClearRequest"}}}},
            "responses": {"200": json({"$ref": "#/components/schemas/CacheClear"}, "What was cleared"),
                          "400": errors["400"], **admin}}},
    }
