"""Twenty JSON Schemas of the kinds applications ask for (written for this benchmark), each with
the request that goes with it: nested objects, arrays with minimum sizes, enums, bounded
numbers, nullable fields and required properties."""
from __future__ import annotations


def _obj(required: list[str], **props) -> dict:
    return {"type": "object", "required": required, "properties": props}


S, INT, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}


def _list(item: dict, least: int = 0) -> dict:
    return {"type": "array", "items": item, "minItems": least}


SCHEMAS: list[tuple[str, dict]] = [
    ("a person with a home", _obj(["name", "age", "tags", "home"], name=S, age=INT, tags=_list(S),
                                  home=_obj(["city", "country"], city=S, country=S))),
    ("a product in a shop", _obj(["sku", "title", "price", "in_stock"], sku=S, title=S,
                                 price={"type": "number", "minimum": 0}, in_stock=B)),
    ("an order with its lines", _obj(["id", "lines"], id=INT, lines=_list(_obj(["sku", "qty"], sku=S, qty=INT), 1))),
    ("a concert", _obj(["artist", "date", "venue"], artist=S, date=S, venue=_obj(["name", "seats"], name=S, seats=INT))),
    ("a recipe", _obj(["title", "ingredients", "steps"], title=S, ingredients=_list(S, 2), steps=_list(S, 1))),
    ("a book", _obj(["title", "author", "year", "genre"], title=S, author=S, year=INT,
                    genre={"enum": ["novel", "poetry", "essay", "science"]})),
    ("a weather report", _obj(["city", "temp_c", "sky"], city=S, temp_c=N,
                              sky={"enum": ["clear", "cloudy", "rain", "snow"]}, wind_kmh=N)),
    ("an invoice", _obj(["number", "customer", "total", "paid"], number=S, customer=_obj(["name"], name=S),
                        total=N, paid=B)),
    ("a to-do list", _obj(["owner", "tasks"], owner=S, tasks=_list(_obj(["text", "done"], text=S, done=B), 1))),
    ("a film", _obj(["title", "director", "minutes", "cast"], title=S, director=S,
                    minutes={"type": "integer", "minimum": 1, "maximum": 600}, cast=_list(S, 1))),
    ("a flight", _obj(["from", "to", "number", "delayed"], **{"from": S, "to": S}, number=S, delayed=B)),
    ("a user's settings", _obj(["user", "settings"], user=S, settings=_obj(
        ["theme", "notifications"], theme={"enum": ["light", "dark"]},
        notifications=_obj(["email", "sms"], email=B, sms=B)))),
    ("a sensor reading", _obj(["sensor", "value", "unit", "error"], sensor=S, value=N, unit=S,
                              error={"type": ["string", "null"]})),
    ("a small library", _obj(["name", "books"], name=S, books=_list(_obj(["title", "copies"], title=S, copies=INT), 1))),
    ("a playlist", _obj(["name", "songs"], name=S, songs=_list(_obj(["title", "seconds"], title=S, seconds=INT), 2))),
    ("a survey answer", _obj(["respondent", "score", "comment"], respondent=INT,
                             score={"type": "integer", "minimum": 1, "maximum": 5}, comment=S)),
    ("a bank transfer", _obj(["from_account", "to_account", "amount", "currency"], from_account=S, to_account=S,
                             amount={"type": "number", "exclusiveMinimum": 0},
                             currency={"enum": ["EUR", "USD", "GBP"]})),
    ("an employee", _obj(["name", "role", "manager", "skills"], name=S, role=S, manager={"type": ["string", "null"]},
                         skills=_list(S))),
    ("a calendar day", _obj(["date", "events"], date=S, events=_list(_obj(["title", "start", "end"], title=S,
                                                                          start=S, end=S)))),
    ("a city guide", _obj(["city", "sights", "best_month"], city=S, sights=_list(_obj(["name", "free"], name=S,
                                                                                       free=B), 1),
                          best_month={"type": "integer", "minimum": 1, "maximum": 12})),
]
