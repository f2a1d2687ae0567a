"""The engine registry: every candidate engine by name, loaded lazily by module path (as
schemes are), and the one spec syntax every command and the server use to name one.

A spec is ``ENGINE[:MODEL]``: ``transformers``, ``vllm:smollm2-135m-instruct``,
``openai:http://127.0.0.1:8000/v1#smollm2``. MODEL left out is the generator. Two short
forms stay accepted: ``http(s)://HOST/v1#MODEL`` is the openai engine's, and a bare
generator preset or local folder is the transformers engine's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR, preset
from samark.registry import CatalogModules, Registry
from samark.sampling.base import EngineAbilities
from samark.sampling.catalog import ENGINE_CATALOG, EngineInfo

if TYPE_CHECKING:
    from samark.sampling.base import Engine

#: an engine's loader: the process's engine for a MODEL (a preset, a folder, URL#MODEL)
EngineLoader = Callable[[str], "Engine"]
L = TypeVar("L", bound=Callable[[str], object])


ENGINES: Registry[EngineLoader] = Registry("engine", catalog=CatalogModules(ENGINE_CATALOG))
#: what the engines registered from outside the catalog are (a plugin's)
_INFO: dict[str, EngineInfo] = {}


def register_engine(
    name: str,
    *,
    description: str | None = None,
    abilities: EngineAbilities | None = None,
    model: str | None = None,
) -> Callable[[L], L]:
    """Register ``name``'s loader: called with the spec's MODEL, it returns the process's
    engine for it (a :class:`~samark.sampling.base.Engine`). A built-in engine's
    description and abilities live in :mod:`samark.sampling.catalog`; an engine registered
    from outside gives them here."""
    if name in ENGINE_CATALOG:
        if description is not None or abilities is not None:
            raise ValueError(f"engine {name!r} is catalogued: its description lives there")
        info = ENGINE_CATALOG[name][1]
    else:
        if not description or abilities is None:
            raise ValueError("an engine needs a description and its abilities")
        info = EngineInfo(name, description, abilities)
        if model:
            info = dataclasses.replace(info, model=model)
    add = ENGINES.register(name)

    def wrap(loader: L) -> L:
        add(loader)  # type: ignore[arg-type]  # refuses a name registered twice
        if name not in ENGINE_CATALOG:
            _INFO[name] = info
        return loader

    return wrap


def engine_info(name: str) -> EngineInfo:
    """What engine ``name`` is and can do (a clear error for an unknown one), without
    loading it."""
    if name in ENGINE_CATALOG:
        return ENGINE_CATALOG[name][1]
    if name not in _INFO:
        ENGINES.get(name)  # the registry names an unknown engine
    return _INFO[name]


def engine_names() -> list[str]:
    return ENGINES.names()


@dataclass(frozen=True)
class EngineSpec:
    """An engine by name and the model it runs (None: the generator)."""

    engine: str
    model: str | None = None

    def __str__(self) -> str:
        return self.engine if self.model is None else f"{self.engine}:{self.model}"

    @property
    def info(self) -> EngineInfo:
        return engine_info(self.engine)


def parse_engine_spec(spec: str) -> EngineSpec:
    """``ENGINE[:MODEL]`` (or a short form: ``URL#MODEL``, a bare model) as an
    :class:`EngineSpec`; an empty spec or MODEL is an error."""
    spec = spec.strip()
    if not spec:
        raise SamarkError(f"an engine spec is ENGINE[:MODEL], ENGINE one of {engine_names()}")
    if spec.startswith(("http://", "https://")):
        return EngineSpec("openai", spec)
    name, colon, model = spec.partition(":")
    if name in engine_names():
        if colon and not model:
            raise SamarkError(f"engine spec {spec!r} names no model: {name}:MODEL, or {name}")
        return EngineSpec(name, model or None)
    if preset(spec) is not None or Path(spec).expanduser().is_dir():
        return EngineSpec("transformers", spec)  # a preset name or a local folder
    raise SamarkError(
        f"unknown engine {name!r}; known: {', '.join(engine_names())} (a spec is "
        "ENGINE[:MODEL], e.g. vllm:smollm2-135m-instruct or openai:http://HOST/v1#MODEL)"
    )


def load_engine(spec: str | EngineSpec, *, generator: str = DEFAULT_GENERATOR) -> Engine:
    """The process's engine for ``spec`` (MODEL left out: ``generator``); an engine whose
    modules are missing is a clear error naming what to install."""
    parsed = parse_engine_spec(spec) if isinstance(spec, str) else spec
    info = parsed.info
    if not info.available():
        missing = ", ".join(info.requires)
        raise SamarkError(f"the {info.name} engine needs {missing}: {info.install}")
    return ENGINES.get(parsed.engine)(parsed.model or generator)
