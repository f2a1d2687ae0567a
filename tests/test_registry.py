"""The registries of schemes and datasets."""

from __future__ import annotations

import pytest


def test_registries_name_what_they_hold() -> None:
    from samark.datasets import dataset_names, load_dataset
    from samark.errors import SamarkError
    from samark.schemes import scheme_names

    assert {"samark", "samark-dagger"} <= set(scheme_names())
    assert {"cnn_dailymail", "wikipedia_leads", "jsonl"} <= set(dataset_names())
    with pytest.raises(SamarkError, match="unknown dataset 'nope'; known"):
        load_dataset("nope")


def test_import_and_help_load_no_model_library() -> None:
    """Schemes register lazily (samark.schemes.catalog): importing samark, the CLI's help
    and `samark schemes list` import no torch or transformers."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "import samark\n"
        "from samark.cli import app\n"
        "r = CliRunner()\n"
        "assert r.invoke(app, ['--help']).exit_code == 0\n"
        "listed = r.invoke(app, ['schemes', 'list'])\n"
        "assert listed.exit_code == 0 and 'samark-layered' in listed.output\n"
        "libraries = ('torch', 'transformers', 'sentence_transformers')\n"
        "heavy = [m for m in libraries if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_catalogued_schemes_load_on_first_use() -> None:
    from samark.schemes.base import SCHEMES, register_scheme, scheme_info, scheme_revision

    assert scheme_info("kgw").unit == "token" and scheme_revision("kgw") >= 1
    assert not scheme_info("unwatermarked").detectable
    assert callable(SCHEMES.get("synthid"))  # imports its module
    with pytest.raises(ValueError, match="catalogued"):
        register_scheme("kgw", unit="token", description="another KGW")
    with pytest.raises(ValueError, match="unit must be one of"):
        register_scheme("a-new-scheme")


def test_an_outside_scheme_registers_with_its_description() -> None:
    from samark.schemes.base import Watermark, register_scheme, scheme_info, scheme_names

    @register_scheme("test-outside-scheme", unit="sentence", description="a test's scheme")
    class _Outside(Watermark):  # pragma: no cover - never built
        name = "test-outside-scheme"

    assert "test-outside-scheme" in scheme_names()
    assert scheme_info("test-outside-scheme").description == "a test's scheme"
    with pytest.raises(TypeError, match="takes a Watermark class"):  # a factory is refused

        @register_scheme("test-a-factory", unit="sentence", description="a factory")
        def _factory(**kwargs):  # pragma: no cover - never built
            raise NotImplementedError


def test_the_registry_keeps_classes_so_a_ring_is_sized_before_building() -> None:
    from samark.schemes.base import scheme_class
    from samark.schemes.samark.ring_scoring import ring_null_count
    from samark.schemes.samark.scheme import SAMark, SAMarkDagger
    from samark.schemes.semstamp import KSemStamp, SemStamp

    assert scheme_class("samark-dagger") is SAMarkDagger and issubclass(SAMarkDagger, SAMark)
    assert scheme_class("k-semstamp") is KSemStamp and issubclass(KSemStamp, SemStamp)
    need = ring_null_count(64, 0.01)
    # never fewer null sets than a ring needs; more where asked; other schemes unchanged
    assert SAMarkDagger.ring_params({}, 64, 0.01) == {"n_null": need}
    assert SAMark.ring_params({"n_null": 10}, 64, 0.01)["n_null"] == need
    assert SAMark.ring_params({"n_null": need + 5}, 64, 0.01)["n_null"] == need + 5
    assert scheme_class("kgw").ring_params({"gamma": 0.25}, 64, 0.01) == {"gamma": 0.25}


def test_the_pivot_detector_is_a_declared_ability(tmp_path) -> None:
    """What only SAMark's detector takes (a centring reference, keyed cells) is asked of
    the declared ability ``pivot_detector``, never of the statistics a scheme offers."""
    from samark.errors import SamarkError
    from samark.schemes import scheme_names
    from samark.schemes.base import scheme_info
    from samark.serving import ServerConfig, ServeSettings

    able = [n for n in scheme_names() if scheme_info(n).pivot_detector]
    assert able == ["samark", "samark-dagger", "samark-layered"]
    assert all(scheme_info(n).statistics for n in able)
    centring = tmp_path / "centring.npz"
    centring.write_bytes(b"")
    access = ServeSettings(tokens=frozenset({"t" * 24}), concurrent_generations=1)
    assert ServerConfig(key="k", centring=centring, access=access).centring == centring
    with pytest.raises(SamarkError, match="--centring is not an option of kgw"):
        ServerConfig(key="k", scheme="kgw", centring=centring, access=access)
