"""A named registry: the one mechanism behind the scheme, engine, dataset, attack, metric
and record-backend lists."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from samark.errors import SamarkError

T = TypeVar("T")


class CatalogModules(Mapping[str, str]):
    """The name -> module column of a catalog whose entries are ``(module, info)``, read
    live (an entry added to the catalog later counts): a :class:`Registry`'s ``catalog``
    where the catalog also describes what it names (schemes, engines)."""

    def __init__(self, catalog: Mapping[str, tuple[str, object]]) -> None:
        self._catalog = catalog

    def __getitem__(self, name: str) -> str:
        return self._catalog[name][0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._catalog)

    def __len__(self) -> int:
        return len(self._catalog)


class Registry(Generic[T]):
    """Maps names to factories; ``register`` is a decorator.

    A ``catalog`` maps each built-in name to the module whose import registers it, so a
    name is known (listed, checked) without importing what it names; its first ``get``
    imports the module. The catalog is read on every use: an entry added to it later
    counts. Adding an item is one module (the decorator) plus one catalog entry."""

    def __init__(self, kind: str, catalog: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._catalog: Mapping[str, str] = {} if catalog is None else catalog

    def register(self, name: str) -> Callable[[T], T]:
        def wrap(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item

        return wrap

    def get(self, name: str) -> T:
        if name not in self._items and name in self._catalog:
            module = self._catalog[name]
            importlib.import_module(module)
            if name not in self._items:
                raise SamarkError(
                    f"{self.kind} {name!r}: its catalog entry names module {module}, "
                    f"which registers no {self.kind} of that name"
                )
        try:
            return self._items[name]
        except KeyError:
            raise SamarkError(f"unknown {self.kind} {name!r}; known: {self.names()}") from None

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._catalog))
