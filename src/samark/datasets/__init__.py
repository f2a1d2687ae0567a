"""Human-written text sources, by name, and their splitting into prompts and windows.

- ``registry``: :class:`Document`, the loaders by name (``@register_dataset``) and the
  catalog of built-in ones, each loaded on first use;
- ``loaders`` and ``debian_corpora``: the built-in loaders (``debian_packages`` fetches
  what ships as Debian packages);
- ``splitting``: prompts and continuations, windows of human text.
"""

from __future__ import annotations

from samark.datasets.registry import DATASETS, DatasetLoader, Document, register_dataset
from samark.datasets.splitting import Example, human_windows, leading_sentences, prompt_examples

__all__ = [
    "DATASETS",
    "DatasetLoader",
    "Document",
    "Example",
    "dataset_names",
    "human_windows",
    "leading_sentences",
    "load_dataset",
    "prompt_examples",
    "register_dataset",
]


def load_dataset(name: str, **kwargs: object) -> list[Document]:
    """The documents of dataset ``name`` (its loader's keywords, e.g. ``limit``)."""
    return DATASETS.get(name)(**kwargs)


def dataset_names() -> list[str]:
    return DATASETS.names()
