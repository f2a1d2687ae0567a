"""The docs agree with the program (issue 65): the demo's N, length and time, the shipped
default's N, every extra, and no password in a command's help. Every number is read from
the code, so a change to the code that leaves the docs behind fails here."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import tomllib
from typer.testing import CliRunner

from samark.cli import app
from samark.cli.demo import DEMO_CANDIDATES, DEMO_SENTENCES, DEMO_TIME
from samark.schemes.samark.layered import DEFAULT_CANDIDATES

ROOT = Path(__file__).resolve().parents[1]


def _words(path: str) -> str:
    """A document's text with every run of whitespace one space (lines wrap anywhere)."""
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


def _help(*command: str) -> str:
    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", out.output).split())


def test_the_demo_is_told_alike_in_the_readme_the_usage_guide_and_its_help() -> None:
    readme, usage, said = _words("README.md"), _words("docs/usage.md"), _help("demo")
    for where, text in (("README.md", readme), ("docs/usage.md", usage), ("--help", said)):
        assert DEMO_TIME in text, f"{where} does not give the demo's time as {DEMO_TIME!r}"
    for where, text in (("README.md", readme), ("docs/usage.md", usage)):
        assert f"N = {DEMO_CANDIDATES} candidates a sentence" in text, where
        assert f"{DEMO_SENTENCES}-sentence news continuation" in text, where
        # one time only: no other "N s on a quiet 2-core CPU" for the demo
        times = re.findall(r"(\d+(?:\.\d+)?) s on a quiet 2-core CPU", text)
        assert set(times) <= {DEMO_TIME.split()[1]}, (where, times)
    assert f"[default: {DEMO_CANDIDATES}]" in said


def test_the_readme_gives_the_shipped_defaults_n() -> None:
    readme = _words("README.md")
    claimed = re.findall(r"the shipped default \(N = (\d+)\)", readme)
    assert claimed, "the README no longer names the shipped default's N"
    assert {int(n) for n in claimed} == {DEFAULT_CANDIDATES}
    assert f"{DEFAULT_CANDIDATES} for the default scheme" in _help("generate")
    assert f"{DEFAULT_CANDIDATES} for the default scheme" in _help("serve")


def test_every_extra_is_listed_in_the_readme_and_the_quickstart_installs_the_demos() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    readme = _words("README.md")
    missing = [name for name in extras if f"`[{name}]`" not in readme]
    assert not missing, f"extras the README does not list: {missing}"
    # the demo tests a paraphrased copy, which needs [eval]: the Quickstart installs it
    quickstart = next(line for line in readme.split("```") if "samark demo" in line)
    assert '-e ".[eval]"' in quickstart


def test_no_help_shows_a_password_in_a_url() -> None:
    for command in (("detect",), ("generate",), ("serve",), ("record", "migrate")):
        said = _help(*command)
        assert not re.search(r"postgres(ql)?://[^ @/]*:[^ @/]*@", said), command
    assert "PGPASSWORD" in _help("detect")


def test_generate_help_breaks_no_sentence_mid_line() -> None:
    """Each line of the description ends a sentence or is about as wide as its neighbours
    (a short line mid-paragraph is a docstring broken mid-sentence)."""
    out = CliRunner().invoke(app, ["generate", "--help"], env={"COLUMNS": "200"})
    lines = out.output.split("Usage:")[1].split("╭")[0].splitlines()[2:]
    prose = [line.strip() for line in lines]
    for line, after in itertools.pairwise(prose):
        if line and after:  # a line inside a paragraph
            assert len(line) > 60 or line.endswith((".", ":", ";")), line
