"""Messages that point the right way (issue 65): an unknown --scheme is named as unknown
(not "add --any-scheme", which then failed too), and a key file cut short is damaged, not
"not JSON"."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.keys import KeyFileError, WatermarkKey

KEYS = Path(__file__).parent / "data" / "keys"


@pytest.mark.parametrize("extra", [[], ["--any-scheme"]])
def test_an_unknown_scheme_is_called_unknown_with_or_without_any_scheme(extra) -> None:
    out = CliRunner().invoke(
        app,
        [
            "detect",
            "Some words here.",
            "--key",
            str(KEYS / "plain.key"),
            "--scheme",
            "nonsense",
            *extra,
        ],
    )
    said = " ".join(out.output.split())
    assert out.exit_code == 2
    assert "unknown scheme 'nonsense'; choose one of: " in said and "samark-layered" in said
    assert "--any-scheme" not in said


def test_a_key_file_cut_in_half_is_damaged_and_a_stranger_is_not_a_key(tmp_path) -> None:
    whole = (KEYS / "plain.key").read_bytes()
    cut = tmp_path / "cut.key"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(KeyFileError, match=r"cut\.key is a damaged samark key file \(cut short"):
        WatermarkKey.load(cut)
    other = tmp_path / "notes.key"
    other.write_text("shopping: eggs, milk")
    with pytest.raises(KeyFileError, match=r"notes\.key is not a samark key file \(not JSON\)"):
        WatermarkKey.load(other)
    out = CliRunner().invoke(app, ["detect", "Some words here.", "--key", str(cut)])
    assert out.exit_code == 2 and "damaged" in out.output
