"""The registry of human-text sources: a :class:`Document` (an id and its text), the
loaders by name, and the catalog of built-in ones. A loader is a function decorated
``@register_dataset("name")``; its module is imported when the name is first loaded
(:data:`CATALOG`), so listing datasets imports none of them. A new dataset is one module
plus one entry in :data:`CATALOG` (CONTRIBUTING.md, "Add a dataset")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samark.registry import Registry


@dataclass(frozen=True)
class Document:
    id: str
    text: str


#: dataset name -> the module whose import registers its loader
CATALOG: dict[str, str] = {
    "booksum": "samark.datasets.loaders",
    "c4": "samark.datasets.loaders",
    "cnn_dailymail": "samark.datasets.loaders",
    "debian_handbook": "samark.datasets.loaders",
    "jane_austen": "samark.datasets.loaders",
    "jsonl": "samark.datasets.loaders",
    "wikipedia_leads": "samark.datasets.loaders",
    # more genres from Debian packages
    "fortunes": "samark.datasets.debian_corpora",
    "licenses": "samark.datasets.debian_corpora",
    "python_docs": "samark.datasets.debian_corpora",
    "reuters": "samark.datasets.debian_corpora",
}

DatasetLoader = Callable[..., list[Document]]
DATASETS: Registry[DatasetLoader] = Registry("dataset", catalog=CATALOG)
register_dataset = DATASETS.register
