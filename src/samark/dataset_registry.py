"""The registry of human-text sources: a :class:`Document` (an id and its text) and the
loaders by name. ``samark.datasets`` holds the built-in loaders and ``load_dataset``;
a module with more loaders (``samark.debian_corpora``, a plugin) registers here without
importing them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samark.registry import Registry


@dataclass(frozen=True)
class Document:
    id: str
    text: str


DatasetLoader = Callable[..., list[Document]]
DATASETS: Registry[DatasetLoader] = Registry("dataset")
register_dataset = DATASETS.register
