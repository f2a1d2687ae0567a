"""Pivot spaces: the fit, keys that draw their pivots in a space, and their files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from scipy import stats

from samark.errors import KeyFileError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.keys.pivot_spaces import (
    PivotSpace,
    UnknownPivotSpaceError,
    load_pivot_space,
    shipped_pivot_spaces,
)
from samark.keys.pivots import derive_pivots_in_space, null_pivots_in_space
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.pivot_space_fitting import fit_pivot_space

SECRET = bytes(range(32))


def _space(rank: int = 6, dim: int = 24, seed: int = 0) -> PivotSpace:
    q = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, rank)))[0]
    return PivotSpace("test", q.T)


def test_fit_finds_where_sentences_vary_and_documents_do_not() -> None:
    # documents' means vary along the first 12 axes; sentences within a document along
    # the last 4 (which independent sentences also give their means a little of)
    rng = np.random.default_rng(0)
    dim, docs = 16, []
    for _ in range(200):
        mean = np.zeros(dim)
        mean[:12] = rng.standard_normal(12)
        sents = mean + 0.05 * rng.standard_normal((8, dim))
        sents[:, -4:] += rng.standard_normal((8, 4))
        docs.append(sents)
    basis = fit_pivot_space(docs, 4)
    np.testing.assert_allclose(basis @ basis.T, np.eye(4), atol=1e-10)
    assert (basis[:, -4:] ** 2).sum() > 3.9  # the within-document axes (4 at most)
    assert (basis[:, :12] ** 2).sum() < 0.1  # next to nothing of the topic axes
    with pytest.raises(ValueError, match="rank"):
        fit_pivot_space(docs, 17)
    with pytest.raises(ValueError, match="two sentences"):
        fit_pivot_space([d[:1] for d in docs], 2)


def test_pivots_in_space_live_there_and_are_reproducible() -> None:
    space = _space()
    p = derive_pivots_in_space(SECRET, space.basis, 3)
    np.testing.assert_allclose(p @ p.T, np.eye(3), atol=1e-12)
    residual = p - (p @ space.basis.T) @ space.basis
    np.testing.assert_allclose(residual, 0.0, atol=1e-12)
    again = derive_pivots_in_space(SECRET, space.basis.copy(), 3)
    assert p.tobytes() == again.tobytes()
    assert not np.allclose(p, derive_pivots_in_space(bytes(32), space.basis, 3))
    with pytest.raises(ValueError, match="rank"):
        derive_pivots_in_space(SECRET, space.basis, 7)


def test_golden_pivots_in_the_shipped_space() -> None:
    space = load_pivot_space("mpnet-quiet-128")
    p = derive_pivots_in_space(SECRET, space.basis, 2)
    digest = hashlib.sha256(p.astype("<f8").tobytes()).hexdigest()
    # pinned once: a change to the derivation, the shipped file or the platform breaks it
    assert digest == GOLDEN_SPACE_PIVOTS


def test_null_pivots_follow_the_keys_law() -> None:
    # a key's pivots and the detector's null pivots must be exchangeable: compare the
    # distribution of one coordinate (in the space's basis) over many secrets with the nulls'
    space = _space(rank=5, dim=20, seed=3)
    keys = np.array(
        [derive_pivots_in_space(i.to_bytes(32, "big"), space.basis, 2) for i in range(400)]
    )
    nulls = null_pivots_in_space(2000, space.basis, 2, seed=1)
    assert nulls.shape == (2000, 2, 20)
    np.testing.assert_allclose(
        np.einsum("kcd,ked->kce", nulls, nulls),
        np.broadcast_to(np.eye(2), (2000, 2, 2)),
        atol=1e-12,
    )
    np.testing.assert_allclose(nulls - (nulls @ space.basis.T) @ space.basis, 0.0, atol=1e-12)
    for channel in (0, 1):
        a = (keys[:, channel] @ space.basis.T)[:, 0]
        b = (nulls[:, channel] @ space.basis.T)[:, 0]
        assert stats.ks_2samp(a, b).pvalue > 0.001
    # and not the law of unconstrained pivots: their coordinate in the space is smaller
    assert np.abs(b).mean() > 2 * np.sqrt(2 / np.pi / 20)


def test_key_in_space_has_its_own_id_and_pivots() -> None:
    space = _space(rank=8, dim=32)
    plain = WatermarkKey(SECRET, EmbedderIdentity("e", "f" * 64))
    key = plain.with_samark(PivotDraw.in_space(space))
    assert key.key_id != plain.key_id
    assert key.samark.pivots(32, 2).shape == (2, 32)
    assert not np.allclose(key.samark.pivots(32, 2), plain.samark.pivots(32, 2))
    nulls = key.samark.null_pivots(30, 32, 2, seed=0)
    np.testing.assert_allclose(nulls - (nulls @ space.basis.T) @ space.basis, 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="not both"):
        WatermarkKey(SECRET, plain.embedder, PivotDraw(np.ones((1, 32)), space))
    with pytest.raises(Exception, match="32-d"):
        key.samark.pivots(64, 2)


def _shipped_identity(name: str) -> EmbedderIdentity:
    entry = shipped_pivot_spaces()[name]
    return EmbedderIdentity(entry["embedder"], entry["fingerprint"])


def test_key_file_names_its_space_and_pins_its_hash(tmp_path) -> None:
    space = load_pivot_space("mpnet-quiet-128")
    assert space.rank == 128 and space.dim == 768
    key = WatermarkKey.generate(_shipped_identity("mpnet-quiet-128"), PivotDraw.in_space(space))
    path = key.save(tmp_path / "k.key")
    record = json.loads(path.read_text())
    assert record["version"] == 2  # a samark that reads only version 1 refuses it
    assert record["space"] == {
        "name": "mpnet-quiet-128",
        "rank": 128,
        "dim": 768,
        "sha256": space.sha256,
    }
    assert len(path.read_bytes()) < 2000  # the basis ships with samark, not in the key
    loaded = WatermarkKey.load(path)
    assert loaded.key_id == key.key_id
    assert loaded.samark.pivots(768, 2).tobytes() == key.samark.pivots(768, 2).tobytes()
    # version and space must agree: a version-1 reader would ignore the space
    downgraded = dict(record, version=1)
    path.write_text(json.dumps(downgraded))
    with pytest.raises(KeyFileError, match="version and space disagree"):
        WatermarkKey.load(path)
    # a key made with another basis under the same name fails clearly
    record["space"]["sha256"] = "0" * 64
    path.write_text(json.dumps(record))
    with pytest.raises(KeyFileError, match="not the one the key was made with"):
        WatermarkKey.load(path)
    record["space"]["name"] = "no-such-space"
    path.write_text(json.dumps(record))
    with pytest.raises(KeyFileError, match="no pivot space named 'no-such-space'"):
        WatermarkKey.load(path)


def test_space_of_another_embedder_is_refused() -> None:
    with pytest.raises(UnknownPivotSpaceError, match="belongs to embedder"):
        load_pivot_space("mpnet-quiet-128", fingerprint="0" * 64)
    assert set(shipped_pivot_spaces("all-minilm-l6-v2")) == {"minilm-quiet-64"}


GOLDEN_SPACE_PIVOTS = "f9c5eba77affe4bdf318e25d18d3249f6121e2278a09ca90ed59befa8eba5210"
