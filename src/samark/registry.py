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
        #: names whose item registers itself when ``load`` runs (a module import)
        self._lazy: dict[str, Callable[[], None]] = {}

    def lazy(self, name: str, load: Callable[[], None]) -> None:
        """Name an item that ``load`` registers on first use (e.g. by importing the
        module that holds it)."""
        self._lazy[name] = load

    def register(self, name: str) -> Callable[[T], T]:
        def wrap(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item

        return wrap

    def get(self, name: str) -> T:
        if name not in self._items and name in self._lazy:
            self._lazy[name]()
        try:
            return self._items[name]
        except KeyError:
            raise SamarkError(f"unknown {self.kind} {name!r}; known: {self.names()}") from None

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._lazy))
