"""JSON as types: what a request body, a record line or a stored row holds.

A value read from JSON is a :data:`JSONValue`; a caller narrows it (``isinstance``) before
it uses it, so a malformed body is a clear error, never an ``AttributeError`` deep inside.
Structured things with known fields are ``TypedDict``s or dataclasses of their own; these
aliases are for what is JSON and nothing more.
"""

from __future__ import annotations

from typing import TypeAlias

#: a JSON scalar
JSONScalar: TypeAlias = str | int | float | bool | None
#: any JSON value
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
#: a JSON object (a record line, a request body)
JSONObject: TypeAlias = dict[str, JSONValue]
