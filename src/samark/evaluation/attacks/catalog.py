"""Every built-in attack and the module that registers it, known without importing it:
listing attacks or checking an experiment's attack names imports none of them (nor the
models some need). A new attack is one module whose class says ``@register_attack("name")``
plus one entry here (CONTRIBUTING.md, "Add an attack")."""

from __future__ import annotations

_A = "samark.evaluation.attacks."
#: attack name -> the module whose import registers it
CATALOG: dict[str, str] = {
    "doc-p": _A + "lm_rewrite",
    "doc-p-local": _A + "local_paraphrase",
    "doc-t": _A + "translation",
    "human-mix": _A + "human_mix",
    "markllm-synonym": _A + "markllm_synonym",
    "markllm-word-delete": _A + "markllm_word_deletion",
    "piggyback": _A + "piggyback",
    "semantic-stealing": _A + "semantic_stealing",
    "shuffle": _A + "shuffle",
    "token-rewrite": _A + "token_rewrite",
    "token-stealing": _A + "token_stealing",
    "word-delete": _A + "word_edit",
    "word-substitute": _A + "word_edit",
}
