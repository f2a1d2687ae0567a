"""MarkLLM 0.1.5 without network access: the one place its import-time downloads are stubbed.

MarkLLM (``pip install --no-deps markllm==0.1.5``; its pins ``openai==0.28`` and
``Pillow==9.4.0`` would replace samark's) reaches the network in two places that offline
work never needs:

- ``markllm.evaluation.tools.oracle`` (imported by every evaluation pipeline) runs
  ``tiktoken.encoding_for_model("gpt-4")`` at import time, which downloads a BPE file; the
  encodings serve only its GPT oracle. :func:`offline` hands it a stand-in encoding that
  says so when used, and a stand-in ``tiktoken`` module where tiktoken is not installed;
  likewise a stand-in ``translate`` module (only the back-translation editor uses it).
- its synonym editors call ``nltk.download("wordnet")`` when built. :func:`offline` makes
  that call find WordNet where samark keeps it (Debian's ``wordnet-base``,
  :mod:`samark.evaluation.wordnet`) and never download.

Use it around the imports and around building MarkLLM's editors::

    with offline():
        from markllm.evaluation.pipelines.detection import WatermarkedTextDetectionPipeline
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import sys
import types
from collections.abc import Iterator
from typing import NoReturn, Protocol

#: modules MarkLLM imports for online features only: a stand-in each where not installed
_ONLINE_ONLY = ("tiktoken", "translate")


class OfflineFeatureError(RuntimeError):
    """A MarkLLM feature that needs the network (or a package not installed) was used."""


class _Unavailable:
    """Stands where MarkLLM keeps an online-only object; any use raises a clear error."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> NoReturn:
        raise OfflineFeatureError(f"{self._what} is not available offline (samark's MarkLLM stubs)")

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise OfflineFeatureError(f"{self._what} is not available offline (samark's MarkLLM stubs)")


class _Translator:
    """``translate.Translator`` where the package is absent: MarkLLM builds one as a default
    argument when its text editors are imported; translating raises."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.translate = _Unavailable("translate.Translator (pip install translate)")


def _no_encoding(model: str) -> _Unavailable:
    """``tiktoken.encoding_for_model`` while offline: no download; using it raises."""
    return _Unavailable(f"tiktoken's {model} encoding")


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"samark's offline stand-in for {name} (not installed)")
    if name == "tiktoken":
        module.encoding_for_model = _no_encoding  # type: ignore[attr-defined]
    if name == "translate":
        module.Translator = _Translator  # type: ignore[attr-defined]
    return module


def _wordnet_only(info_or_id: object = None, *args: object, **kwargs: object) -> bool:
    """``nltk.download`` while offline: WordNet is found where samark keeps it; anything
    else is refused (never downloaded)."""
    if info_or_id != "wordnet":
        raise OfflineFeatureError(f"nltk.download({info_or_id!r}) is not available offline")
    from samark.evaluation.wordnet import load_wordnet

    load_wordnet()  # puts Debian's WordNet on nltk's data path (`samark models install`)
    return True


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Import or build MarkLLM's pieces with no download: stand-ins for ``tiktoken`` (its
    encodings) and ``translate`` where absent, and ``nltk.download`` served from samark's
    WordNet. Everything is put back on exit (the modules MarkLLM imported keep their
    stand-ins, which only its online features touch)."""
    added = []
    for name in _ONLINE_ONLY:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = _stand_in(name)
            added.append(name)
    restore: list[tuple[object, str, object]] = []  # (owner, attribute, value)
    if "tiktoken" not in added and importlib.util.find_spec("tiktoken") is not None:
        tiktoken = importlib.import_module("tiktoken")
        restore.append((tiktoken, "encoding_for_model", tiktoken.encoding_for_model))
        setattr(tiktoken, "encoding_for_model", _no_encoding)  # noqa: B010
    if importlib.util.find_spec("nltk") is not None:
        import nltk

        restore.append((nltk, "download", nltk.download))
        nltk.download = _wordnet_only
    try:
        yield
    finally:
        for owner, attr, value in restore:
            setattr(owner, attr, value)
        for name in added:
            sys.modules.pop(name, None)


class TextEditor(Protocol):
    """A MarkLLM text editor (its ``edit``)."""

    def edit(self, text: str) -> object: ...


def seeded_edit(editor: TextEditor, text: str, seed: int) -> str:
    """MarkLLM text editor ``editor`` applied to ``text`` under ``seed``: its editors draw
    from Python's global ``random``, which is seeded for the call and put back after, so a
    text's edit depends on its seed alone."""
    state = random.getstate()
    random.seed(seed)
    try:
        return str(editor.edit(text))
    finally:
        random.setstate(state)
