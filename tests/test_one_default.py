"""One default for each setting, in the scheme's config: the same key and text give the
same p-value from Python (``create_scheme(name, key=k).detect``), ``samark detect``,
``POST /v1/detect`` and a keyring of one, for SAMark, its layered mark and a token
scheme; the paper's z is a named preset, not a default (issue 64)."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi", reason="serving needs samark[server]")

from samark.cli import app
from samark.errors import SamarkError
from samark.keys import WatermarkKey
from samark.keys.keyring import Keyring
from samark.schemes import create_scheme
from samark.schemes.base import scheme_revision
from samark.serving import ServerConfig, ServeSettings, create_app

TOKEN = "one-default-token-0123456789abcdef"
ACCESS = ServeSettings(tokens=frozenset({TOKEN}), default_sentences=2, max_sentences=2)
TEXT = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked "
    "for more money for parks and libraries. The mayor said the plan balances those needs."
)


@pytest.mark.parametrize("name", ["samark", "samark-layered", "kgw"])
def test_every_door_gives_the_same_p_value(
    name, tmp_path, mpnet, smollm2, served_app, post_json
) -> None:
    key = WatermarkKey(b"one-default-key-0000000000000000", mpnet.identity)
    key.save(tmp_path / "k.key")
    ring = Keyring.create(tmp_path / "ring", mpnet.identity)
    ring.add(key, "only")

    in_python = create_scheme(name, key=key).detect(TEXT)
    runner = CliRunner()
    by_key = runner.invoke(
        app, ["detect", TEXT, "--key", str(tmp_path / "k.key"), "--scheme", name]
    )
    by_ring = runner.invoke(
        app, ["detect", TEXT, "--keyring", str(tmp_path / "ring"), "--scheme", name]
    )
    assert by_key.exit_code in (0, 1) and by_ring.exit_code in (0, 1), by_key.output
    from_cli = json.loads(by_key.stdout.splitlines()[0])
    from_ring = json.loads(by_ring.stdout.splitlines()[0])
    served = create_app(ServerConfig(key=tmp_path / "k.key", scheme=name, access=ACCESS))
    with served_app(served) as base:
        status, from_server = post_json(base, "/v1/detect", {"text": TEXT}, TOKEN)
    assert status == 200, from_server

    answers = [from_cli, from_ring, from_server]
    assert {a["statistic"] for a in answers} == {in_python.statistic}
    assert [a["p_value"] for a in answers] == [in_python.p_value] * 3
    if name != "kgw":  # SAMark's family: the product's statistic, not the paper's z
        assert "scan" in in_python.statistic


def test_the_papers_z_is_a_preset(mpnet_key) -> None:
    """``preset="paper"`` gives SAMark the paper's z (what its experiment rows start from);
    a parameter given wins over the preset; the layered mark's paper preset is its default;
    an unknown preset is named."""
    assert create_scheme("samark", key=mpnet_key).config.detection.statistic == "scan"
    paper = create_scheme("samark", key=mpnet_key, preset="paper")
    assert paper.config.detection.statistic == "z" and paper.detect(TEXT).statistic == "z"
    named = create_scheme("samark", key=mpnet_key, preset="paper", statistic="alignment")
    assert named.config.detection.statistic == "alignment"
    assert (
        create_scheme("samark-dagger", key=mpnet_key, preset="paper").config.detection.statistic
        == "z"
    )
    layered = create_scheme("samark-layered", key=mpnet_key, preset="paper")
    assert layered.config.detection.statistic == "scan"
    with pytest.raises(ValueError, match=r"no preset 'draft'.*paper.*product"):
        create_scheme("samark", key=mpnet_key, preset="draft")
    for name in ("samark", "samark-layered", "semstamp"):
        with pytest.raises(SamarkError, match=f"{name} marks and detects with a key"):
            create_scheme(name)


def test_an_experiment_row_starts_from_the_paper_preset() -> None:
    """A row that names no preset is the paper's: its fingerprint is the one its records
    were written under; "product" is another row (another fingerprint); an unknown preset
    is named when the experiment is read."""
    from samark.evaluation.experiment import Experiment, ExperimentError, SchemeSpec

    paper = SchemeSpec("samark", "SAMark", {"channels": 2})
    named = SchemeSpec("samark", "SAMark", {"channels": 2}, preset="paper")
    assert paper.preset == "paper" and paper.fingerprint == named.fingerprint
    # the fingerprint as it was computed before presets existed (the stored records' keys)
    revision = scheme_revision("samark")
    before = ["samark", {"channels": 2}, *([{"revision": revision}] if revision else [])]
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert paper.fingerprint == digest
    product = SchemeSpec("samark", "SAMark", {"channels": 2}, preset="product")
    assert product.fingerprint != paper.fingerprint
    text = """
name = "tiny"
[dataset]
name = "cnn_dailymail"
[[schemes]]
name = "samark"
preset = "draft"
"""
    with pytest.raises(ExperimentError, match='preset must be "paper" or "product"'):
        Experiment.parse(text)
    read = Experiment.parse(text.replace("draft", "product"))
    assert [s.preset for s in read.schemes] == ["product"]
