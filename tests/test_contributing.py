"""CONTRIBUTING.md's walk-throughs work: the scheme, the attack and the dataset it shows,
copied from the page into a module of their own plus one catalog entry, are used by name;
and every built-in attack and dataset is one decorator plus one catalog entry. (The
engine's walk-through is tested in test_engines.py.)"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

PAGE = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")


def _block(first_line: str) -> str:
    """The page's python block whose first line is ``first_line``."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE, flags=re.S)
    found = [b for b in blocks if b.startswith(first_line + "\n")]
    assert len(found) == 1, f"CONTRIBUTING.md has no single block starting {first_line!r}"
    return found[0]


def _catalog_entry(first_line: str, module_block: str) -> tuple[str, str]:
    """The name and the module's last part of the page's one-entry catalog block, whose
    module (the attacks' ``_A`` prefix resolved) must be the whole dotted name of the file
    ``module_block`` names (``# src/samark/datasets/proverbs.py``: samark.datasets.proverbs)."""
    from samark.evaluation.attacks.catalog import _A

    entry = _block(first_line).splitlines()[1]
    match = re.fullmatch(r'\s*"([^"]+)": (_A \+ )?"([^"]+)",', entry)
    assert match, entry
    module = (_A if match[2] else "") + match[3]
    file = module_block.removeprefix("# src/").removesuffix(".py").replace("/", ".")
    assert module == file, f"CONTRIBUTING.md's entry names {module}, its file is {file}"
    return match[1], module.rsplit(".", 1)[-1]


def _as_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, stem: str) -> str:
    """``code`` written as a module of its own, importable under a name no test shares."""
    name = f"contributing_walkthrough_{stem}"
    (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert name not in sys.modules
    return name


def test_the_scheme_walk_through(tmp_path, monkeypatch, smollm2) -> None:
    """``mymark`` from the page, with its catalog entry: listed without being imported,
    built by name with its parameters, and through ``samark.testing``'s checks."""
    from samark.cli import app
    from samark.keys import EmbedderIdentity, WatermarkKey
    from samark.schemes import create_scheme, scheme_names
    from samark.schemes.base import scheme_info
    from samark.schemes.catalog import CATALOG, SchemeInfo
    from samark.testing import check_scheme

    code = _block("# src/samark/schemes/mymark.py")
    entry = _block("# src/samark/schemes/catalog.py: one entry").splitlines()[1]
    ((path, info),) = eval(entry, {"_S": "samark.schemes.", "SchemeInfo": SchemeInfo})
    assert (path, info.name) == ("samark.schemes.mymark", "mymark")
    module = _as_module(tmp_path, monkeypatch, code, "mymark")
    monkeypatch.setitem(CATALOG, info.name, (module, info))  # the one entry

    assert "mymark" in scheme_names() and module not in sys.modules
    listed = CliRunner().invoke(app, ["schemes", "list"])
    assert listed.exit_code == 0 and "mymark" in listed.output, listed.output
    identity = EmbedderIdentity("none", "token-schemes-only")
    key = WatermarkKey(b"contributing-walk-through-key-01", identity)
    other = WatermarkKey(b"contributing-walk-through-key-02", identity)
    scheme = create_scheme("mymark", key=key, gamma=0.25)
    assert scheme.config.gamma == 0.25 and scheme_info("mymark").unit == "token"
    with pytest.raises(TypeError):
        create_scheme("mymark", key=key, gamma=0.25, colour="green")
    texts = [
        "The committee met on Monday and agreed to review the budget again next spring.",
        "She walked along the river until the lights of the town came into view.",
    ]
    check_scheme(lambda k: create_scheme("mymark", key=k), key, other, texts)


def test_the_attack_walk_through(tmp_path, monkeypatch) -> None:
    from samark.cli import app
    from samark.evaluation.attacks import ATTACKS, create_attack
    from samark.evaluation.attacks.catalog import CATALOG

    first = "# src/samark/evaluation/attacks/sentence_drop.py"
    code = _block(first)
    name, stem = _catalog_entry("# src/samark/evaluation/attacks/catalog.py: one entry", first)
    assert (name, stem) == ("sentence-drop", "sentence_drop")
    module = _as_module(tmp_path, monkeypatch, code, stem)
    monkeypatch.setitem(CATALOG, name, module)  # the one entry, naming the temp module

    assert name in ATTACKS.names() and module not in sys.modules  # listed, not imported
    listed = CliRunner().invoke(app, ["attack", "--list"])
    assert listed.exit_code == 0, listed.output
    assert "sentence-drop    one sentence removed at random" in listed.output
    declared = ATTACKS.get(name)  # the class, its metadata read without building it
    assert (declared.name, declared.kind, declared.paraphrase) == (name, "removal", False)
    attack = create_attack(name)
    assert isinstance(attack, declared)
    text = "One is here. Two is there. Three is gone. Four stays."
    dropped = [attack.apply(text, seed=s) for s in range(8)]
    assert all(len(d.split(". ")) == 3 for d in dropped)  # one sentence fewer, each time
    assert len(set(dropped)) > 1 and dropped == [attack.apply(text, seed=s) for s in range(8)]
    assert attack.apply("Alone here.", seed=0) == "Alone here."


def test_the_dataset_walk_through(tmp_path, monkeypatch) -> None:
    from samark.datasets import dataset_names, load_dataset
    from samark.datasets.registry import CATALOG

    first = "# src/samark/datasets/proverbs.py"
    code = _block(first)
    name, stem = _catalog_entry("# src/samark/datasets/registry.py, CATALOG: one entry", first)
    assert (name, stem) == ("proverbs", "proverbs")
    module = _as_module(tmp_path, monkeypatch, code, stem)
    monkeypatch.setitem(CATALOG, name, module)
    data = tmp_path / "data"
    data.mkdir()
    (data / "proverbs.txt").write_text("Haste makes waste.\n\nWell begun is half done.\n")
    monkeypatch.setenv("SAMARK_DATA_DIR", str(data))

    assert name in dataset_names() and module not in sys.modules
    docs = load_dataset(name)
    assert [(d.id, d.text) for d in docs] == [
        ("proverb-0", "Haste makes waste."),
        ("proverb-2", "Well begun is half done."),
    ]
    assert [d.text for d in load_dataset(name, limit=1)] == ["Haste makes waste."]


def _built_in(registry) -> set[str]:
    """The names a module of samark registered (not a test's walk-through module)."""
    return {n for n in registry.names() if registry.get(n).__module__.startswith("samark.")}


def test_every_built_in_attack_is_one_decorator_and_one_catalog_entry() -> None:
    from samark.evaluation.attacks import ATTACKS, Attack
    from samark.evaluation.attacks.catalog import CATALOG

    for name, module in CATALOG.items():
        registered = ATTACKS.get(name)
        assert registered.__module__ == module  # its catalog module registers it
        assert issubclass(registered, Attack) and registered.name == name  # a class, named
        assert registered.kind in ("removal", "forgery") and registered.summary
    package = importlib.import_module("samark.evaluation.attacks")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"samark.evaluation.attacks.{info.name}")
    assert _built_in(ATTACKS) == set(CATALOG)  # and every decorator has its entry


def test_every_built_in_dataset_is_one_decorator_and_one_catalog_entry() -> None:
    import samark.datasets.debian_corpora
    import samark.datasets.loaders
    from samark.datasets.registry import CATALOG, DATASETS

    for name, module in CATALOG.items():
        assert DATASETS.get(name).__module__ == module  # its catalog module registers it
    # every loader module imported
    assert samark.datasets.loaders and samark.datasets.debian_corpora
    assert _built_in(DATASETS) == set(CATALOG)  # and every decorator has its entry


def test_a_catalog_entry_whose_module_registers_nothing_says_so(monkeypatch) -> None:
    from samark.errors import SamarkError
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.attacks.catalog import CATALOG

    monkeypatch.setitem(CATALOG, "misfiled", "samark.evaluation.attacks.shuffle")
    with pytest.raises(SamarkError, match=r"misfiled.*shuffle, which registers no attack"):
        create_attack("misfiled")


@pytest.mark.slow
def test_the_layered_scheme_walk_through(
    tmp_path, monkeypatch, mpnet, smollm2, served_app, post_json
) -> None:
    """``layered-both`` from the page: one file in ``schemes/`` and one catalog entry, and
    every door (Python, ``samark detect``, a keyring of one, ``/v1/detect``) gives its
    p-value, which is the larger of its two layers' (not the layered mark's Fisher)."""
    import json

    pytest.importorskip("fastapi", reason="serving needs samark[server]")
    from samark.cli import app
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring
    from samark.schemes import create_scheme
    from samark.schemes.catalog import _SAMARK_CAPABILITIES, CATALOG, SchemeInfo
    from samark.serving import ServerConfig, ServeSettings, create_app

    first = "# src/samark/schemes/layered_both.py"
    code = _block(first)
    entry = _block("# src/samark/schemes/catalog.py: one layered entry").splitlines()[1]
    names = {"_S": "samark.schemes.", "SchemeInfo": SchemeInfo}
    ((path, info),) = eval(entry, {**names, "_SAMARK_CAPABILITIES": _SAMARK_CAPABILITIES})
    assert path == first.removeprefix("# src/").removesuffix(".py").replace("/", ".")
    assert path.startswith("samark.schemes.")  # the scheme's file lives in schemes/
    module = _as_module(tmp_path, monkeypatch, code, "layered_both")
    monkeypatch.setitem(CATALOG, info.name, (module, info))
    from samark.schemes.base import SCHEMES

    # its registration is undone after the test, as its catalog entry is
    monkeypatch.setattr(SCHEMES, "_items", dict(SCHEMES._items))

    text = (
        "The council approved the budget on Tuesday after a long debate. Residents had "
        "asked for more money for parks and libraries. The mayor said the plan balances "
        "those needs."
    )
    key = WatermarkKey(b"contributing-layered-walk-key-01", mpnet.identity)
    key.save(tmp_path / "k.key")
    ring = Keyring.create(tmp_path / "ring", mpnet.identity)
    ring.add(key, "only")
    in_python = create_scheme("layered-both", key=key).detect(text)
    details = in_python.details or {}
    assert in_python.p_value == max(details["p_semantic"], details["p_token"])
    fisher = create_scheme("samark-layered", key=key).detect(text)
    assert fisher.p_value != in_python.p_value  # a variant, not the layered mark again

    runner = CliRunner()
    given = ["--scheme", "layered-both"]
    by_key = runner.invoke(app, ["detect", text, "--key", str(tmp_path / "k.key"), *given])
    by_ring = runner.invoke(app, ["detect", text, "--keyring", str(tmp_path / "ring"), *given])
    assert by_key.exit_code in (0, 1) and by_ring.exit_code in (0, 1), by_key.output
    access = ServeSettings(tokens=frozenset({"walk-token-0123456789abcdef0"}))
    config = ServerConfig(key=tmp_path / "k.key", scheme="layered-both", access=access)
    with served_app(create_app(config)) as base:
        status, served = post_json(base, "/v1/detect", {"text": text}, next(iter(access.tokens)))
    assert status == 200, served
    answers = [
        json.loads(by_key.stdout.splitlines()[0]),
        json.loads(by_ring.stdout.splitlines()[0]),
    ]
    assert [a["p_value"] for a in [*answers, served]] == [in_python.p_value] * 3
