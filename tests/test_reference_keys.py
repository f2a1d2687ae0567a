"""Keys that carry a reference implementation's integer key (``hash_key``, file version 5),
and the goldens that say keys without one keep every answer they gave."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.errors import KeyFileError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.schemes import create_scheme

EMBEDDER = EmbedderIdentity("all-mpnet-base-v2", "0" * 64)
SECRET = b"samark-golden-key-00000000000000"
VOCAB = 49152


def test_a_key_without_a_hash_key_keeps_its_answers() -> None:
    """Goldens computed before keys could carry a hash_key (main at f8f3d58): the key id,
    KGW's derived hashing key and Unigram's green list."""
    key = WatermarkKey(SECRET, EMBEDDER, scheme="unigram")
    assert key.hash_key is None and key.key_id == "3960bd58758e100f"
    assert create_scheme("kgw", key=key).watermarking.hashing_key == 1561415138
    green = create_scheme("unigram", key=key).green_mask(VOCAB).numpy()
    assert hashlib.sha256(np.packbits(green).tobytes()).hexdigest()[:16] == "72478f926d7b8df4"
    assert int(green.sum()) == VOCAB // 2


def test_a_hash_key_replaces_the_derived_one_and_changes_the_id() -> None:
    key = WatermarkKey(SECRET, EMBEDDER, scheme="kgw")
    ref = key.with_hash_key(15485863)
    assert ref.hash_key == 15485863 and ref.key_id != key.key_id
    assert ref.key_id != key.with_hash_key(15485864).key_id
    assert create_scheme("kgw", key=ref).watermarking.hashing_key == 15485863
    assert "15485863" not in repr(ref) and "15485863" not in str(ref)
    own = create_scheme("unigram", key=key).green_mask(VOCAB).numpy()
    theirs = create_scheme("unigram", key=ref).green_mask(VOCAB).numpy()
    assert own.sum() == theirs.sum() and not np.array_equal(own, theirs)


@pytest.mark.parametrize("bad", [0, -1, 2**63, True, 1.5, "15485863"])
def test_a_bad_hash_key_is_refused(bad) -> None:
    with pytest.raises(KeyFileError, match="hash_key"):
        WatermarkKey(SECRET, EMBEDDER, hash_key=bad)


def test_a_hash_key_is_written_as_version_5_and_read_back(tmp_path) -> None:
    key = WatermarkKey(SECRET, EMBEDDER, scheme="unigram", hash_key=15485863)
    path = key.save(tmp_path / "ref.key")
    record = json.loads(path.read_text())
    assert record["version"] == 5 and record["hash_key"] == 15485863
    back = WatermarkKey.load(path)
    assert back.hash_key == 15485863 and back.key_id == key.key_id and back.scheme == "unigram"
    plain = WatermarkKey(SECRET, EMBEDDER, scheme="unigram").save(tmp_path / "plain.key")
    assert json.loads(plain.read_text())["version"] == 4  # unchanged for keys without one
    for damage in (
        lambda r: r.update(version=4),  # a hash_key in a version that has none
        lambda r: r.pop("hash_key"),  # version 5 without one
        lambda r: r.update(hash_key=15485864),  # another hash_key: another id
    ):
        broken = dict(record)
        damage(broken)
        bad = tmp_path / "bad.key"
        bad.write_text(json.dumps(broken))
        with pytest.raises(KeyFileError, match="damaged"):
            WatermarkKey.load(bad)


def test_keygen_hash_key_is_for_kgw_and_unigram_only(tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "k.key"
    result = runner.invoke(app, ["keygen", str(out), "--scheme", "samark", "--hash-key", "7"])
    assert result.exit_code != 0 and "--hash-key is for kgw and unigram" in result.output
    result = runner.invoke(app, ["keygen", str(out), "--scheme", "kgw", "--hash-key", "0"])
    assert result.exit_code != 0 and not out.exists()


@pytest.mark.slow
def test_keygen_writes_a_reference_key(tmp_path, minilm) -> None:
    out = tmp_path / "ref.key"
    result = CliRunner().invoke(
        app,
        ["keygen", str(out), "--scheme", "kgw", "--hash-key", "15485863", "--embedder", "minilm"],
    )
    assert result.exit_code == 0, result.output
    assert "15485863" not in result.output
    key = WatermarkKey.load(out)
    assert key.hash_key == 15485863 and key.made_for() == "kgw"
