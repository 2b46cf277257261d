"""OpenAPI descriptions of /v1/files and /v1/batches, merged into gateway.api.openapi.SPEC."""
from __future__ import annotations


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str) -> dict:
    return {"type": [kind, "null"]}


_COUNTS = {"type": "object", "properties": {k: {"type": "integer"} for k in ("total", "completed", "failed")}}
_PAGE = [{"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1}},
         {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}}]

SCHEMAS = {
    "File": {"type": "object", "required": ["id", "object", "bytes", "created_at", "filename", "purpose"],
             "properties": {"id": {"type": "string"}, "object": {"const": "file"}, "bytes": {"type": "integer"},
                            "created_at": {"type": "integer"}, "expires_at": _nullable("integer"),
                            "filename": {"type": "string"}, "purpose": {"enum": ["batch", "batch_output"]},
                            "status": {"type": "string"}}},
    "Batch": {"type": "object", "required": ["id", "object", "endpoint", "input_file_id", "status", "request_counts"],
              "properties": {"id": {"type": "string"}, "object": {"const": "batch"}, "endpoint": {"type": "string"},
                             "input_file_id": {"type": "string"}, "completion_window": {"type": "string"},
                             "status": {"enum": ["validating", "failed", "in_progress", "finalizing", "completed",
                                                 "expired", "cancelling", "cancelled"]},
                             "output_file_id": _nullable("string"), "error_file_id": _nullable("string"),
                             "request_counts": _COUNTS, "usage": {"type": "object"},
                             "metadata": _nullable("object")}},
    "BatchRequest": {"type": "object", "required": ["input_file_id", "endpoint", "completion_window"],
                     "additionalProperties": False, "properties": {
                         "input_file_id": {"type": "string"},
                         "endpoint": {"enum": ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]},
                         "completion_window": {"type": "string", "pattern": "^[1-9][0-9]*h$"},
                         "metadata": {"type": "object", "maxProperties": 16,
                                      "additionalProperties": {"type": "string", "maxLength": 512}}}},
}


def _list(item: str) -> dict:
    return {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"}, "data": {"type": "array", "items": _ref(item)}, "has_more": {"type": "boolean"}}}


SCHEMAS.update({"FileList": _list("File"), "BatchList": _list("Batch")})


def paths(errors: dict, json_body) -> dict:
    def op(summary: str, answer: dict, what: str, **extra) -> dict:
        return {"summary": summary, "responses": {"200": json_body(answer, what), **errors}, **extra}

    file_id = [{"name": "file_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    batch_id = [{"name": "batch_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    upload = {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["purpose", "file"], "properties": {
            "purpose": {"const": "batch"}, "file": {"type": "string", "format": "binary",
                                                    "description": "JSONL: custom_id, method, url, body per line"}}}}}}
    content = {"summary": "The file's bytes", "parameters": file_id, "responses": {
        "200": {"description": "JSONL", "content": {"application/jsonl": {"schema": {"type": "string"}}}}, **errors}}
    return {
        "/v1/files": {"post": op("Upload a batch input file", _ref("File"), "The file", requestBody=upload),
                      "get": op("The tenant's files, newest first", _ref("FileList"), "Files", parameters=[
                          *_PAGE, {"name": "purpose", "in": "query", "required": False, "schema": {"type": "string"}}])},
        "/v1/files/{file_id}": {"get": op("A file", _ref("File"), "The file", parameters=file_id),
                                "delete": op("Delete a file", {"type": "object"}, "Deleted", parameters=file_id)},
        "/v1/files/{file_id}/content": {"get": content},
        "/v1/batches": {"post": op("Create a batch: its lines run at batch priority", _ref("Batch"), "The batch",
                                   requestBody={"required": True, "content": {"application/json": {
                                       "schema": _ref("BatchRequest")}}}),
                        "get": op("The tenant's batches, newest first", _ref("BatchList"), "Batches",
                                  parameters=_PAGE)},
        "/v1/batches/{batch_id}": {"get": op("A batch", _ref("Batch"), "The batch", parameters=batch_id)},
        "/v1/batches/{batch_id}/cancel": {"post": op("Cancel a batch: stop dispatching, report what finished",
                                                     _ref("Batch"), "The batch", parameters=batch_id)},
    }
