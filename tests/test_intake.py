"""One intake for every door (samark.intake): `samark detect`, `/v1/detect` and the page
take the same limits and refuse binary text in the same words; `samark detect` refuses a
text over the server's limits unless --long, which counts its sentences as it embeds."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.intake import (
    MAX_TEXT_CHARS,
    MAX_TEXT_SENTENCES,
    Limits,
    TextRefused,
    check_binary,
    check_chars,
    check_sentences,
    decode,
)
from samark.serving import ServeSettings

#: a key file (its embedder is a test one: nothing here loads a model)
KEY = str(Path(__file__).parent / "data" / "keys" / "plain.key")


def test_the_server_takes_the_intakes_limits_by_default() -> None:
    settings = ServeSettings(auth=False)
    assert settings.max_text_chars == MAX_TEXT_CHARS
    assert settings.max_text_sentences == MAX_TEXT_SENTENCES


@pytest.mark.parametrize("text", ["\x00\x01\x02", "Fine words.\x07", "A\x7fB."])
def test_control_characters_are_binary(text: str) -> None:
    with pytest.raises(TextRefused, match="the text is binary, not text") as refused:
        check_binary(text)
    assert refused.value.code == "binary"


def test_whitespace_controls_and_unicode_are_text() -> None:
    check_binary("Tabs\tand\nlines\r\nand a form feed\x0c are text; so is café — “quoted”.")
    assert decode("Déjà vu.\n".encode(), "in.txt") == "Déjà vu.\n"
    with pytest.raises(TextRefused, match=r"in\.txt is binary, not text \(it holds the control"):
        decode(b"\xff\x00\x01", "in.txt")
    with pytest.raises(TextRefused, match=r"in\.txt is not UTF-8 text"):
        decode(b"caf\xe9", "in.txt")


def test_size_limits_say_the_count_and_the_limit() -> None:
    check_chars("x" * 10, Limits(max_chars=10))
    with pytest.raises(TextRefused, match="a text of 11 characters; at most 10"):
        check_chars("x" * 11, Limits(max_chars=10))
    with pytest.raises(TextRefused, match="a text of 201 sentences; at most 200"):
        check_sentences(201)
    check_sentences(200)


def test_samark_detect_refuses_binary_and_a_text_over_the_limits_before_loading(
    tmp_path,
) -> None:
    """Refused at once (exit 2) with the server's words: no key, no model needed."""
    runner = CliRunner()
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"Looks like text. \x01\x02\x03")
    out = runner.invoke(app, ["detect", str(binary), "--key", KEY])
    assert out.exit_code == 2
    assert "blob.txt is binary, not text (it holds the control character U+0001)" in out.output
    many = tmp_path / "long.txt"
    many.write_text(
        " ".join(f"Sentence number {i} is here." for i in range(MAX_TEXT_SENTENCES + 1))
    )
    out = runner.invoke(app, ["detect", str(many), "--key", KEY])
    assert out.exit_code == 2
    words = " ".join(out.output.split())
    assert f"a text of {MAX_TEXT_SENTENCES + 1} sentences; at most {MAX_TEXT_SENTENCES}" in words
    assert "pass --long to check it anyway" in words
    huge = tmp_path / "huge.txt"
    huge.write_text("word " * (MAX_TEXT_CHARS // 5 + 1) + ".")
    out = runner.invoke(app, ["detect", str(huge), "--key", KEY])
    assert out.exit_code == 2 and "characters; at most 100000" in " ".join(out.output.split())


@pytest.mark.slow
def test_samark_detect_long_checks_it_counting_sentences(mpnet, mpnet_key, tmp_path) -> None:
    """--long checks a text over the limit; its progress counts sentences (the bar's
    last line says 201/201 sentences), never the embedder's batches."""
    key = tmp_path / "test.key"
    mpnet_key.save(key)
    text = tmp_path / "long.txt"
    text.write_text(
        " ".join(f"The {i}th bell rang at noon." for i in range(MAX_TEXT_SENTENCES + 1))
    )
    out = CliRunner().invoke(app, ["detect", str(text), "--key", str(key), "--long"])
    assert out.exit_code in (0, 1), out.output
    assert f"embedding the text: {MAX_TEXT_SENTENCES + 1}/{MAX_TEXT_SENTENCES + 1} sentences" in (
        out.output
    )
    assert "Batches" not in out.output
    assert f'"n_units": {MAX_TEXT_SENTENCES + 1}' in out.output
    refused = CliRunner().invoke(app, ["detect", str(text), "--key", str(key)])
    assert refused.exit_code == 2 and "--long" in refused.output
