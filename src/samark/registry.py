"""A named registry: the one mechanism behind the scheme, dataset, attack and metric lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from samark.errors import SamarkError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to factories; ``register`` is a decorator."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def wrap(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item

        return wrap

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise SamarkError(f"unknown {self.kind} {name!r}; known: {self.names()}") from None

    def names(self) -> list[str]:
        return sorted(self._items)
