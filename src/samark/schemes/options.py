"""What a scheme lets its users set at every door: its public options, declared once.

A scheme's :class:`~samark.schemes.catalog.SchemeInfo` lists the :class:`SchemeOption` s
it takes (each a parameter of its config, with the help every surface shows and whether
it is a research switch). The CLI takes its options' help from here, and the CLI and the
server refuse an option a scheme does not declare with :func:`refuse_undeclared`: the one
wording, never a scheme's refusal copied into a command. Known without importing a scheme
(no torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samark.errors import SamarkError


@dataclass(frozen=True)
class SchemeOption:
    """One public option of a scheme: the config parameter ``name`` and its ``help``."""

    name: str
    help: str
    #: a research switch: experiments set it; the product's surfaces do not show it
    research: bool = False
    #: the values it takes, where they are few
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """How the command line spells it (``null_stop``: ``--null-stop``)."""
        return "--" + self.name.replace("_", "-")


def refuse_undeclared(
    scheme: str, declared: tuple[SchemeOption, ...], given: Mapping[str, object]
) -> None:
    """A :class:`SamarkError` naming each option in ``given`` that has a value (not None)
    and that ``scheme`` does not declare; also one whose value is not among its choices."""
    names = {o.name: o for o in declared}
    stray = [name for name, value in given.items() if value is not None and name not in names]
    if stray:
        flags = ", ".join("--" + n.replace("_", "-") for n in stray)
        offers = ", ".join(o.flag for o in declared if not o.research) or "none"
        verb = "is not an option" if len(stray) == 1 else "are not options"
        raise SamarkError(f"{flags} {verb} of {scheme}; leave it out (its options: {offers})")
    for name, value in given.items():
        option = names.get(name)
        if (
            option is not None
            and option.choices
            and value is not None
            and value not in option.choices
        ):
            raise SamarkError(
                f"{scheme}'s {option.flag} is one of {', '.join(option.choices)}, not {value!r}"
            )


#: SAMark's family's detection options (samark, samark-dagger, samark-layered)
SAMARK_OPTIONS: tuple[SchemeOption, ...] = (
    SchemeOption(
        "statistic",
        "The test statistic: scan (the default: keeps its power on text mixed with human "
        "writing), z (the paper's) or alignment (docs/statistics.md). Every one is exact.",
        choices=("z", "alignment", "scan"),
    ),
    SchemeOption(
        "centring",
        "A centring reference (`samark centring build`): each text is centred by its "
        "topic's mean before scoring (docs/statistics.md, 'Per-key false positives').",
    ),
    SchemeOption(
        "cells",
        "Keyed semantic cells (0: static pivots; left out: 0 for samark, the key's own for "
        "samark-layered: 64 for a key from `samark keygen`); detect with the value you "
        "generated with (docs/parameters.md, 'Keyed semantic cells').",
    ),
    SchemeOption(
        "null_stop",
        "Sequential null draws (Besag-Clifford): stop a text's null draws once every "
        "key's statistic has been reached this many times (10 is usual). Valid p-values, "
        "equal to the fixed ones below h/draws; text no key marked is checked in a "
        "fraction of the time, most of all against a large keyring. Keys written since "
        "2026-11-28 (projected null draws).",
    ),
    SchemeOption(
        "null_draws",
        "The public null draws texts are detected against with keyed cells: full or "
        "projected (left out: the key's). Another setting than the key's gives other "
        "(exact) p-values.",
        research=True,
        choices=("full", "projected"),
    ),
)
