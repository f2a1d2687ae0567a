"""The research extension is never shown (issue 64): SAMark's research switches
(``SAMarkResearch``) are in no scheme's declared public options, and no command's help
offers them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.schemes.base import scheme_info
from samark.schemes.catalog import CATALOG
from samark.schemes.samark.config import FLAT, PARTS, RESEARCH_FIELDS, SAMarkConfig


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_the_research_part_holds_the_research_switches() -> None:
    assert {"steer", "prune_at", "prune_keep", "cell_margin_sd", "record_signal"} <= (
        RESEARCH_FIELDS
    )
    assert {n for n in RESEARCH_FIELDS if n.startswith("adaptive_")} == {
        "adaptive_chunk",
        "adaptive_matches",
        "adaptive_saturation",
        "adaptive_patience",
    }
    assert all(FLAT[n] == "research" for n in RESEARCH_FIELDS)
    assert set(PARTS) == {"generation", "selection", "detection", "research"}
    # every flat name is routed, and to_dict gives every one back
    assert list(SAMarkConfig().to_dict()) == list(FLAT)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_no_declared_option_is_a_research_switch(name: str) -> None:
    declared = scheme_info(name).options
    assert not {o.name for o in declared} & RESEARCH_FIELDS


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["generate"], "--candidates"),
        (["detect"], "--statistic"),
        (["serve"], "--statistic"),
        (["check-key"], "--key"),
        (["page"], "--key"),
    ],
)
def test_no_command_offers_a_research_switch(command: list[str], shown: str) -> None:
    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert shown in out.output  # the help lists the command's options
    offered = [flag(n) for n in sorted(RESEARCH_FIELDS) if flag(n) in out.output]
    assert not offered, f"samark {command[0]} offers research switches: {offered}"
