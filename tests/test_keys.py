"""Keys: golden pivots, orthonormality, file handling, and secrecy."""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest

from samark.errors import EmbedderMismatchError, KeyFileError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.keys.pivots import _ln, derive_pivots, null_pivots
from samark.keys.samark_material import PivotDraw

EMB = EmbedderIdentity("test-embedder", "f" * 64)
SECRET = bytes(range(32))


def test_golden_pivots_are_bit_identical() -> None:
    # Pinned once; any change to the derivation (or a platform difference) breaks it.
    pivots = derive_pivots(SECRET, 768, 2)
    digest = hashlib.sha256(pivots.astype("<f8").tobytes()).hexdigest()
    assert digest == "bb1b989312514b8ec5fbd87eb3d21e826a7dd1fe49ce14cf5900336fd9b62cd2"
    assert [float.fromhex(h) for h in ("0x1.bd0b118436de2p-9", "0x1.1b3cc96584e16p-5")] == list(
        pivots[0, :2]
    )
    three = derive_pivots(SECRET, 384, 3)
    digest3 = hashlib.sha256(three.astype("<f8").tobytes()).hexdigest()
    assert digest3 == "8de6d4332fb18d033d0ffdc442ca6d89604179355d871f038d1304b8d001a6df"


@pytest.mark.parametrize(("dim", "channels"), [(768, 2), (384, 4), (16, 16)])
def test_pivots_orthonormal(dim: int, channels: int) -> None:
    p = derive_pivots(os.urandom(32), dim, channels)
    assert p.shape == (channels, dim)
    np.testing.assert_allclose(p @ p.T, np.eye(channels), atol=1e-12)


def test_different_keys_and_shapes_differ() -> None:
    a = derive_pivots(SECRET, 768, 2)
    b = derive_pivots(SECRET[:-1] + b"\xff", 768, 2)
    assert np.abs(a @ b.T).max() < 0.2  # independent random directions in 768-d
    assert not np.array_equal(derive_pivots(SECRET, 767, 2)[:, :767], a[:, :767])


def test_pivot_entries_look_gaussian() -> None:
    # sqrt(d) * entries of a Haar frame are ~ N(0, 1)
    from scipy import stats

    p = derive_pivots(SECRET, 4096, 2) * math.sqrt(4096)
    assert stats.kstest(p.ravel(), "norm").pvalue > 1e-3


def test_series_log_matches_libm() -> None:
    xs = np.concatenate([np.linspace(1e-12, 1 - 1e-12, 5001), [1e-300, 0.5, 0.999999]])
    assert max(abs(_ln(float(x)) - math.log(x)) / max(1.0, abs(math.log(x))) for x in xs) < 4e-16


def test_null_pivots_orthonormal_and_deterministic() -> None:
    n = null_pivots(50, 64, 2, seed=3)
    assert n.shape == (50, 2, 64)
    np.testing.assert_allclose(
        np.einsum("kcd,ked->kce", n, n), np.broadcast_to(np.eye(2), (50, 2, 2)), atol=1e-12
    )
    np.testing.assert_array_equal(n, null_pivots(50, 64, 2, seed=3))
    assert not np.array_equal(n, null_pivots(50, 64, 2, seed=4))


def test_key_roundtrip_and_permissions(tmp_path) -> None:
    key = WatermarkKey.generate(EMB)
    path = key.save(tmp_path / "k.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = WatermarkKey.load(path)
    assert loaded.key_id == key.key_id
    assert loaded.embedder == EMB
    np.testing.assert_array_equal(loaded.samark.pivots(32, 2), key.samark.pivots(32, 2))
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        key.save(path)


def test_key_never_shows_its_secret(tmp_path) -> None:
    key = WatermarkKey(SECRET, EMB)
    import base64

    secret_forms = [SECRET.hex(), base64.b64encode(SECRET).decode(), repr(SECRET)]
    for shown in (repr(key), str(key), f"{key}", repr(key.samark), str(key.samark)):
        assert not any(s in shown for s in secret_forms)
    for secret_holder in (key, key.samark):
        with pytest.raises(TypeError):
            pickle.dumps(secret_holder)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01binary", "not a samark key file"),
        (b"[1, 2]", "not a samark key file"),
        (b'{"format": "samark-key", "version": 99}', "version 99"),
        (b'{"format": "samark-key", "version": 1, "secret": "!!", "embedder": {}}', "damaged"),
        (
            b'{"format": "samark-key", "version": 1, "secret": "AAAA", '
            b'"embedder": {"name": "x", "fingerprint": "y"}}',
            "at least 16 bytes",
        ),
    ],
)
def test_bad_key_files_fail_clearly(tmp_path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=message):
        WatermarkKey.load(path)


def test_missing_key_file(tmp_path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        WatermarkKey.load(tmp_path / "nope.key")


def test_tampered_key_id_detected(tmp_path) -> None:
    path = WatermarkKey.generate(EMB).save(tmp_path / "k.key")
    path.write_text(path.read_text().replace('"key_id": "', '"key_id": "0'))
    with pytest.raises(KeyFileError, match="key id does not match"):
        WatermarkKey.load(path)


def test_embedder_mismatch_is_an_error() -> None:
    key = WatermarkKey(SECRET, EMB)
    other = EmbedderIdentity("other", "0" * 64)
    with pytest.raises(EmbedderMismatchError, match="made for embedder 'test-embedder'") as info:
        key.check_embedder(other)
    assert SECRET.hex() not in str(info.value)
    key.check_embedder(EmbedderIdentity("renamed", "f" * 64))  # same weights, other name: fine


def test_pivots_avoid_given_directions() -> None:
    rng = np.random.default_rng(0)
    avoid = rng.standard_normal((2, 64))
    p = derive_pivots(SECRET, 64, 2, avoid)
    np.testing.assert_allclose(p @ p.T, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(p @ avoid.T, 0.0, atol=1e-12)
    digest = hashlib.sha256(p.astype("<f8").tobytes()).hexdigest()
    assert (
        digest
        == hashlib.sha256(
            derive_pivots(SECRET, 64, 2, avoid.copy()).astype("<f8").tobytes()
        ).hexdigest()
    )
    n = null_pivots(20, 64, 2, seed=0, avoid=avoid)
    np.testing.assert_allclose(np.einsum("kcd,md->kcm", n, avoid), 0.0, atol=1e-12)
    np.testing.assert_allclose(
        np.einsum("kcd,ked->kce", n, n), np.broadcast_to(np.eye(2), (20, 2, 2)), atol=1e-12
    )


def test_key_file_keeps_avoided_directions(tmp_path) -> None:
    avoid = np.random.default_rng(1).standard_normal((2, 32))
    key = WatermarkKey.generate(EMB, PivotDraw.avoiding(avoid))
    loaded = WatermarkKey.load(key.save(tmp_path / "k.key"))
    np.testing.assert_array_equal(loaded.samark.avoid, avoid)
    np.testing.assert_array_equal(loaded.samark.pivots(32, 2), key.samark.pivots(32, 2))
    with pytest.raises(EmbedderMismatchError, match="32-d"):
        loaded.samark.pivots(64, 2)


#: key files written by samark before SAMark's part moved into its package (issue 46):
#: each must keep loading with the same key id, pivots and pivot law
LEGACY_KEYS = {
    # file: (dim, key id, sha256 of the pivots (2 channels), the law's kind and rows,
    # sha256 of the law's directions)
    "plain.key": (
        64,
        "fb77a05bfa34b303",
        "d99602a9313940346e6ecc5b9b9dec5cedfee4d8c55595da7d30c24d28228f55",
        ("avoid", 0),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ),
    "avoiding.key": (
        64,
        "88e26cf09026c1c3",
        "e743779d6fe92caad7dbb646becd176dc8eb29b990a1240c9956479e015a8c1a",
        ("avoid", 2),
        "d0f9622cb8afa33dd847074d9ea987847912a09062c90bfccb43833c9f390d88",
    ),
    "in-space.key": (  # the shipped minilm-quiet-64 space: its file's hash
        384,
        "951f914bd659fd8c",
        "64f2102786396489aa44e13df67eb5f99792a485e7ab6872269135078156c620",
        ("space", 64),
        "fa62bd551b315151ff01e5de4717b529c305779048eda1476c5fabef175f17fb",
    ),
}


@pytest.mark.parametrize("name", sorted(LEGACY_KEYS))
def test_committed_key_files_keep_their_pivots(name: str, tmp_path) -> None:
    dim, key_id, pivots_sha, (kind, rows), law_sha = LEGACY_KEYS[name]
    path = Path(__file__).parent / "data" / "keys" / name
    key = WatermarkKey.load(path)
    assert key.key_id == key_id
    pivots = key.samark.pivots(dim, 2)
    assert hashlib.sha256(pivots.astype("<f8").tobytes()).hexdigest() == pivots_sha
    law = key.samark.pivot_law(dim)
    assert (law.kind, law.rows) == (kind, rows)
    assert hashlib.sha256(law.directions).hexdigest() == law_sha
    # written again, the file is the same bytes
    assert key.save(tmp_path / name).read_bytes() == path.read_bytes()


def test_a_key_names_its_layered_cells_in_version_3(tmp_path) -> None:
    """A key that names keyed cells for its layered mark is written as version 3 (a samark
    that reads only 1-2 would detect its texts on static pivots, so must refuse it), with
    the same id as its static form (the layout is not part of the secret); the committed
    file keeps its cells' anchors, pivots and flags bit for bit."""
    from samark.schemes.samark.cells import key_cells

    path = Path(__file__).parent / "data" / "keys" / "cells.key"
    key = WatermarkKey.load(path)
    assert key.samark.cells == 16
    assert '"version": 3' in path.read_text()
    static = WatermarkKey.load(path.with_name("avoiding.key"))
    assert static.samark.cells == 0 and key.key_id == static.key_id == "88e26cf09026c1c3"
    frames = key_cells(key, 64, 16, 2)
    digests = {
        name: hashlib.sha256(getattr(frames, name).astype("<f4").tobytes()).hexdigest()[:16]
        for name in ("anchors", "pivots", "flags")
    }
    assert digests == {
        "anchors": "870f137378266752",
        "pivots": "982cc0adb9305958",
        "flags": "67718242087c62eb",
    }
    assert key.save(tmp_path / "k.key").read_bytes() == path.read_bytes()
    # the static form of the same secret is written as it always was
    written = static.save(tmp_path / "s.key").read_bytes()
    assert written == path.with_name("avoiding.key").read_bytes()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("cells"), "version and cells disagree"),  # version 3 without cells
        (lambda r: r.update(version=1), "version and cells disagree"),  # cells in version 1
        (lambda r: r.update(cells=1), "damaged"),
        (lambda r: r.update(cells="16"), "damaged"),
    ],
)
def test_a_damaged_cells_key_fails_clearly(tmp_path, edit, message: str) -> None:
    import json

    record = json.loads((Path(__file__).parent / "data" / "keys" / "cells.key").read_text())
    edit(record)
    path = tmp_path / "bad.key"
    path.write_text(json.dumps(record))
    with pytest.raises(KeyFileError, match=message) as info:
        WatermarkKey.load(path)
    assert record["secret"] not in str(info.value)


def test_new_keys_name_the_default_cells(mpnet) -> None:
    from samark.embed import new_key
    from samark.keys.samark_material import DEFAULT_CELLS

    assert DEFAULT_CELLS == 64
    assert new_key(mpnet).samark.cells == DEFAULT_CELLS
    assert new_key(mpnet, cells=0).samark.cells == 0
    assert WatermarkKey.generate(EMB).samark.cells == 0  # the low-level draw: static
    with pytest.raises(ValueError, match="at least 2"):
        PivotDraw(cells=1)
