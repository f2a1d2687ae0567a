"""The scheme owns its surface (issue 64): no scheme name or class in ``samark.cli`` or
``samark.serving`` beyond the registry's defaults; each scheme declares its public
options (the CLI's help and every door's refusal come from the declaration) and shows its
own evidence (``Watermark.evidence``), which the server asks for without testing a
class."""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

import pytest
from typer.testing import CliRunner

from samark.errors import SamarkError
from samark.schemes.base import scheme_class, scheme_info
from samark.schemes.catalog import CATALOG
from samark.schemes.options import refuse_undeclared

SRC = Path(__file__).resolve().parents[1] / "src" / "samark"
SURFACES = ("cli", "serving")
#: where "samark" is the product's name, not a scheme's: the app's title, the
#: OpenAI-style model name and owner, a completion's "samark" field
PRODUCT_NAME_FILES = {"serving/app.py", "serving/routes.py", "serving/settings.py"}


def _surface_files() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(SRC)), ast.parse(path.read_text(), filename=str(path)))
        for surface in SURFACES
        for path in sorted((SRC / surface).rglob("*.py"))
    ]


def _scheme_class_names() -> set[str]:
    names = set()
    for name in CATALOG:
        try:
            names.add(scheme_class(name).__name__)
        except ImportError:  # an optional extra not installed: its module cannot load
            continue
    return names


def test_no_scheme_name_or_class_in_the_cli_or_the_server() -> None:
    schemes = set(CATALOG)
    classes = _scheme_class_names()
    # a scheme's own modules (the centring reference's builder is SAMark's tool, not a
    # scheme: `samark centring build` imports it)
    scheme_modules = {module for module, _ in CATALOG.values()} | {
        "samark.schemes.samark.scheme",
        "samark.schemes.samark.layered",
        "samark.schemes.samark.config",
        "samark.schemes.samark.detector",
    }
    assert {"SAMark", "SAMarkLayered", "KGW"} <= classes  # the check can see them
    found: list[str] = []
    for where, tree in _surface_files():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in schemes
                and not (node.value == "samark" and where in PRODUCT_NAME_FILES)
            ):
                found.append(f"{where}:{node.lineno}: the scheme name {node.value!r}")
            elif isinstance(node, ast.Name | ast.Attribute):
                ident = node.id if isinstance(node, ast.Name) else node.attr
                if ident in classes:
                    found.append(f"{where}:{node.lineno}: the scheme class {ident}")
            elif isinstance(node, ast.ImportFrom) and node.module in scheme_modules:
                found.append(f"{where}:{node.lineno}: imports {node.module}")
    assert not found, "\n".join(found)


#: scheme names that are also words of the product's prose: "samark" (the product),
#: "unwatermarked" (a completion without the mark) and "exp" (an abbreviation)
PROSE_WORDS = {"samark", "unwatermarked", "exp"}
#: the tokens prose lives in (an f-string's text is its own token from Python 3.12)
PROSE_TOKENS = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}


def test_no_scheme_named_in_the_help_docstrings_or_comments() -> None:
    """The words too: help text, docstrings and comments of the CLI and the server name no
    scheme (beyond the registry's default, read from the registry) and no scheme class;
    a scheme's own help comes from its declaration (``samark schemes list``)."""
    names = sorted(set(CATALOG) - PROSE_WORDS, key=len, reverse=True)
    words = names + sorted(_scheme_class_names(), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, words)) + r")(?![\w-])")
    found: list[str] = []
    for surface in SURFACES:
        for path in sorted((SRC / surface).rglob("*.py")):
            with path.open("rb") as handle:
                for token in tokenize.tokenize(handle.readline):
                    if token.type not in PROSE_TOKENS:
                        continue
                    for match in pattern.finditer(token.string):
                        where = f"{path.relative_to(SRC)}:{token.start[0]}"
                        found.append(f"{where}: {match.group(1)!r}")
    assert not found, "\n".join(found)
    assert pattern.search("the samark-layered default") and pattern.search("SAMark's pick")


def test_the_layered_mark_shows_its_layers_and_others_nothing(mpnet, mpnet_key) -> None:
    """``evidence`` is the scheme's: the layered mark gives each sentence's part in each
    layer, whose semantic part is the sentence's p-value; SAMark adds nothing."""
    from samark.schemes import create_scheme

    text = (
        "The council approved the budget on Tuesday. Residents had asked for more parks. "
        "The mayor said the plan balances those needs."
    )
    layered = create_scheme("samark-layered", key=mpnet_key, embedder=mpnet)
    found = layered.detect(text)
    layers = layered.evidence(found)["sentence_layers"]
    assert len(layers) == len(found.sentences) == 3
    assert [p["p_semantic"] for p in layers] == list(found.sentence_p_values)
    assert all(
        0 < p["p_token"] <= 1 and 0 <= p["tokens_green"] <= p["tokens_scored"] for p in layers
    )
    plain = create_scheme("samark", key=mpnet_key, embedder=mpnet)
    assert plain.evidence(plain.detect(text)) == {}


def test_options_are_declared_with_help_and_refused_in_one_wording(tmp_path, mpnet_key) -> None:
    """SAMark's family declares its options; a token scheme declares none, and every door
    (Python's declaration check, ``ServerConfig``, ``samark detect``) refuses one the same
    way; a value outside the declared choices is named."""
    from samark.cli import app
    from samark.serving import ServerConfig, ServeSettings

    declared = scheme_info("samark-layered").options
    assert {o.name for o in declared} >= {"statistic", "centring", "cells", "null_stop"}
    assert all(o.help for o in declared)
    assert scheme_info("kgw").options == ()
    wording = r"--statistic is not an option of kgw; leave it out \(its options: none\)"
    with pytest.raises(SamarkError, match=wording):
        refuse_undeclared("kgw", (), {"statistic": "scan", "cells": None})
    access = ServeSettings(tokens=frozenset({"t" * 32}))
    with pytest.raises(SamarkError, match=wording):
        ServerConfig(key="k", scheme="kgw", statistic="scan", access=access)
    with pytest.raises(SamarkError, match="samark's --statistic is one of z, alignment, scan"):
        ServerConfig(key="k", scheme="samark", statistic="median", access=access)
    mpnet_key.save(tmp_path / "k.key")
    args = ["detect", "A text.", "--key", str(tmp_path / "k.key"), "--scheme", "kgw"]
    out = CliRunner().invoke(app, [*args, "--any-scheme", "--statistic", "scan"])
    assert out.exit_code == 2 and "--statistic is not an option of kgw" in out.output
