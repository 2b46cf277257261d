"""The gateway's OpenAPI 3.1 description, served at `GET /openapi.json`.

Kept as data next to the handlers so a route added without a description shows up in
tests/gateway/test_openapi.py (which compares these paths with the app's router).
"""
from __future__ import annotations

from aiohttp import web

from ..admin import openapi as admin_openapi
from ..cache import openapi as cache_openapi
from ..dropin import openapi as dropin_openapi
from ..batches import openapi as batches_openapi
from ..console import routes as console_routes


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERR = _ref("Error")
_ERRORS = {
    "400": _json(_ERR, "Invalid request: the error names the offending field in `param`"),
    "401": _json(_ERR, "Missing or unknown API key (only when tenants are configured)"),
    "404": _json(_ERR, "Unknown model or path"),
    "413": _json(_ERR, "Request body larger than `limits.max_body_bytes`"),
    "429": _json(_ERR, "Tenant rate limit or hard budget reached"),
    "503": _json(_ERR, "No healthy worker for the tier, or Redis down with a fail-closed policy"),
}
_AUTH_ERRORS = {k: _ERRORS[k] for k in ("401",)}
_ADMIN_ERRORS = {"401": _ERRORS["401"], "403": _json(_ERR, "The endpoint needs the admin key")}

_GENERATION_FIELDS = {
    "model": {"type": "string", "minLength": 1,
              "description": "`auto` (the classifier picks a tier), a tier name, a model name or an alias"},
    "max_tokens": {"type": "integer", "minimum": 1},
    "max_completion_tokens": {"type": "integer", "minimum": 1},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
    "top_k": {"type": "integer", "minimum": -1},
    "n": {"type": "integer", "enum": [1]},
    "seed": {"type": "integer"},
    "stop": {"oneOf": [{"type": "string", "minLength": 1},
                       {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 4}]},
    "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2},
    "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2},
    "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    "ignore_eos": {"type": "boolean"},
    "cascade": {"type": "boolean", "description": "The gateway's cascade on or off for this request, within the "
                                                  "tenant's routing.cascade.mode (docs/routing.md); never sent to a "
                                                  "worker"},
}

_USAGE = {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
          "properties": {k: {"type": "integer", "minimum": 0}
                         for k in ("prompt_tokens", "completion_tokens", "total_tokens")}}

SCHEMAS = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}},
    "ChatMessage": {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"oneOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {
            "type": "object", "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}]}}},
    "ChatCompletionRequest": {"type": "object", "required": ["model", "messages"], "properties": {
        **_GENERATION_FIELDS, "messages": {"type": "array", "minItems": 1, "items": _ref("ChatMessage")}}},
    "CompletionRequest": {"type": "object", "required": ["model", "prompt"], "properties": {
        **_GENERATION_FIELDS, "prompt": {"oneOf": [{"type": "string", "minLength": 1},
                                                   {"type": "array", "minItems": 1, "items": {"type": "integer"}}]}}},
    "Usage": _USAGE,
    "ChatCompletion": {"type": "object", "required": ["id", "object", "model", "choices"], "properties": {
        "id": {"type": "string"}, "object": {"const": "chat.completion"}, "created": {"type": "integer"},
        "model": {"type": "string"}, "usage": _USAGE,
        "choices": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"}, "message": _ref("ChatMessage"),
            "finish_reason": {"type": ["string", "null"]}}}}}},
    "Completion": {"type": "object", "required": ["id", "object", "model", "choices"], "properties": {
        "id": {"type": "string"}, "object": {"const": "text_completion"}, "created": {"type": "integer"},
        "model": {"type": "string"}, "usage": _USAGE,
        "choices": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"}, "text": {"type": "string"},
            "finish_reason": {"type": ["string", "null"]}}}}}},
    "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"}, "data": {"type": "array", "items": {
            "type": "object", "required": ["id", "object", "owned_by"],
            "properties": {"id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"},
                           "owned_by": {"type": "string"}, "tiergate": {"type": "object"}}}}}},
    "RouteDecision": {"type": "object", "required": ["object", "tier", "model", "tenant", "routed_by", "steps"],
                      "properties": {
        "object": {"const": "tiergate.route"}, "requested_model": {"type": "string"},
        "tier": {"type": "string"}, "model": {"type": "string"}, "tenant": {"type": "string"},
        "routed_by": {"enum": ["classifier", "pinned", "policy", "explicit", "escalation", "failover"]},
        "classifier": {"type": ["object", "null"]},
        "p_good": {"type": ["object", "null"], "description": "P(the tier of each level 1..4 is good enough)",
                   "additionalProperties": {"type": "number"}},
        "steps": {"type": "array", "items": {"type": "object", "required": ["step"],
                                             "properties": {"step": {"type": "string"}}}},
        "capabilities": {"type": "object"},
        "priority": {"type": ["string", "null"]}, "max_tokens_cap": {"type": ["integer", "null"]},
        "backend": {"type": ["string", "null"]}, "affinity": {"type": ["string", "null"]}}},
    "Health": {"type": "object", "required": ["status"], "properties": {  # the rest: admin key or no tenants
        "status": {"const": "ok"}, "pid": {"type": "integer"}, "classifier": {"type": "string"},
        "backends": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "healthy": {"type": "boolean"}, "breaker": {"type": "string"}, "outstanding": {"type": "integer"}}}}}},
    "Quality": {"type": "object", "required": ["object", "enabled", "tiers"], "properties": {
        "object": {"const": "tiergate.quality"}, "enabled": {"type": "boolean"},
        "sampling_rate": {"type": "number"}, "top_tier": {"type": "string"},
        "tiers": {"type": "object"}, "classes": {"type": "object"}, "changes": {"type": "array"}}},
    "UsageReport": {"type": "object", "description": "Spend and tokens per tenant and day (all tenants for the admin key)"},
}

_STREAM = {"text/event-stream": {"schema": {"type": "string", "description":
                                            "Server-sent events (`data: {chunk}`), ending with `data: [DONE]`"}}}


def _generate_op(summary: str, request: str, response: str) -> dict:
    ok = _json(_ref(response), "The answer (or an SSE stream when `stream` is true)")
    ok["content"].update(_STREAM)
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": {
        "application/json": {"schema": _ref(request)}}}, "responses": {"200": ok, **_ERRORS}}}


SPEC = {
    "openapi": "3.1.0",
    "info": {"title": "Tiergate gateway", "version": "1.0.0",
             "description": "OpenAI-compatible gateway that routes each request to the cheapest able tier."},
    "components": {"schemas": SCHEMAS, "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"},
                                                    "basic": {"type": "http", "scheme": "basic"}}},
    "security": [{"apiKey": []}, {}],
    "paths": {
        "/v1/chat/completions": _generate_op("Chat completion", "ChatCompletionRequest", "ChatCompletion"),
        "/v1/completions": _generate_op("Text completion", "CompletionRequest", "Completion"),
        "/v1/route": {"post": {"summary": "Dry run: the routing decision for a request, without generating",
                               "requestBody": {"required": True, "content": {"application/json": {"schema": {
                                   "oneOf": [_ref("ChatCompletionRequest"), _ref("CompletionRequest")]}}}},
                               "responses": {"200": _json(_ref("RouteDecision"), "The decision"), **_ERRORS}}},
        "/v1/models": {"get": {"summary": "auto, tiers, models and aliases",
                               "responses": {"200": _json(_ref("ModelList"), "Models"), **_AUTH_ERRORS}}},
        "/v1/usage": {"get": {"summary": "The caller's usage; every tenant's for the admin key",
                              "parameters": [{"name": "days", "in": "query", "required": False,
                                              "schema": {"type": "integer", "minimum": 1, "maximum": 366}},
                                             {"name": "group_by", "in": "query", "required": False,
                                              "description": "tag: each day's figures per tag too (`tags`)",
                                              "schema": {"enum": ["tier", "tag"], "default": "tier"}}],
                              "responses": {"200": _json(_ref("UsageReport"), "Usage"), "400": _ERRORS["400"],
                                            "404": _json(_ERR, "No tenants configured"), **_AUTH_ERRORS}}},
        "/v1/quality": {"get": {"summary": "Quality monitor summary (admin key when tenants are configured)",
                                "responses": {"200": _json(_ref("Quality"), "Summary"), **_ADMIN_ERRORS,
                                              "503": _ERRORS["503"]}}},
        "/admin/classifier/reload": {"post": {"summary": "Reload the classifier model (admin)",
                                              "responses": {"200": _json({"type": "object"}, "Swap event"),
                                                            **_ADMIN_ERRORS,
                                                            "422": _json(_ERR, "Model rejected; old one kept")}}},
        "/admin/router/outcomes": {"post": {
            "summary": "Learn from an outcome file (JSONL; admin): the guard judges the candidates before this answers",
            "parameters": [{"name": "heldout_share", "in": "query", "required": False,
                            "schema": {"type": "number", "minimum": 0, "maximum": 1}},
                           {"name": "tenant", "in": "query", "required": False, "schema": {"type": "string"},
                            "description": "The tenant whose outcomes these are: only its requests read them as "
                                           "nearest outcomes (absent: the operator's, read by every tenant)"}],
            "requestBody": {"required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
            "responses": {"200": _json({"type": "object"}, "Lines taken, the guard's decisions, the router's state"),
                          **_ADMIN_ERRORS, "400": _json(_ERR, "Not an outcome file"),
                          "404": _json(_ERR, "No such tenant"), "409": _json(_ERR, "The classifier in use is a rule"),
                          "413": _json(_ERR, "Over the body limit"), "503": _ERRORS["503"]}}},
        "/health": {"get": {"summary": "Liveness/readiness to anyone; per-worker health to the admin key (or with "
                                       "no tenants configured)", "security": [{}],
                            "responses": {"200": _json(_ref("Health"), "Healthy")}}},
        "/metrics": {"get": {"summary": "Prometheus metrics; series labelled with a tenant only for the admin key "
                                        "(or with no tenants configured)", "security": [{}], "responses": {"200": {
            "description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/openapi.json": {"get": {"summary": "This document", "security": [{}],
                                  "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1")}}},
    },
}


SCHEMAS.update(dropin_openapi.SCHEMAS)
SCHEMAS.update(batches_openapi.SCHEMAS)
SPEC["paths"].update(batches_openapi.paths(_ERRORS, _json))
SPEC["paths"].update(dropin_openapi.paths(_ERRORS, _json))
SPEC["paths"].update(console_routes.describe(_json, _ERR))
SCHEMAS.update(admin_openapi.SCHEMAS)
SPEC["paths"].update(admin_openapi.paths(_ERRORS, _json))
SCHEMAS.update(cache_openapi.SCHEMAS)
SPEC["paths"].update(cache_openapi.paths(_ERRORS, _json))


async def openapi_endpoint(request: web.Request) -> web.Response:
    return web.json_response(SPEC)
