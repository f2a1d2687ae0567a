"""SAMark detection of a Ray Dataset, for corpora beyond one machine (``samark[scale]``).

``detect_dataset`` adds the detection columns with ``map_batches`` over a pool of actors,
each loading the key and the embedder once. Workers read the key from ``key_path``: it
must be readable where they run (the same machine, or a shared file system with owner-only
permissions); the secret never travels through Ray's object store or logs.

    import ray
    from samark.detection.ray import detect_dataset

    ds = ray.data.read_parquet("s3://bucket/texts/")
    detect_dataset(ds, "/secrets/samark.key", workers=8).write_parquet("s3://bucket/out/")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samark.detection.record_files import no_text_field, result_columns
from samark.provenance.c2pa_manifest import strip_manifest

if TYPE_CHECKING:
    import pandas as pd
    from ray.data import ActorPoolStrategy, Dataset

_DTYPES = {
    "p_value": "Float64",
    "is_watermarked": "boolean",
    "n_units": "Int64",
    "payload": "Int64",
}


class _ActorDetector:
    """One per Ray actor: the scheme (key + embedder), or one per key of a ring, is loaded
    once, then reused."""

    def __init__(
        self,
        key_path: str | None,
        keyring: str | None,
        scheme: str,
        field: str,
        params: dict[str, Any],
        threads: int,
    ) -> None:
        import torch

        from samark.keys import WatermarkKey
        from samark.schemes import create_scheme

        torch.set_num_threads(threads)
        from samark.detection.ring_detector import RingDetector
        from samark.keys.keyring import Keyring

        # one key is a ring of one (its results read as the key's own detections)
        self.detector: RingDetector
        if keyring is not None:
            self.detector = RingDetector.from_ring(Keyring.load(keyring), scheme, **params)
        else:
            assert key_path is not None
            one = create_scheme(scheme, key=WatermarkKey.load(key_path), **params)
            self.detector = RingDetector.of_scheme(one)
        self.ring = keyring is not None
        self.field = field

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        values = list(batch[self.field])
        # a C2PA manifest is never scored (the column itself is left as it was)
        texts = [strip_manifest(v) if isinstance(v, str) else "" for v in values]
        columns = result_columns(self.detector.detect_many(texts), ring=self.ring)
        for i, v in enumerate(values):
            if not isinstance(v, str):
                columns["error"][i] = no_text_field(self.field)
        for name, column in columns.items():  # nullable types: a missing p is null, not NaN
            batch[name] = pd.array(column, dtype=_DTYPES.get(name, object))
        return batch


def detect_dataset(
    ds: Dataset,
    key_path: str | None = None,
    *,
    keyring: str | None = None,
    scheme: str = "samark",
    field: str = "text",
    statistic: str | None = None,
    alpha: float = 0.01,
    workers: int = 2,
    batch_size: int = 64,
    threads_per_worker: int = 1,
    cells: int | None = None,
) -> Dataset:
    """``ds`` with ``p_value``, ``is_watermarked``, ``n_units``, ``statistic`` and
    ``error`` columns, computed by ``workers`` actors (lazy, like every Ray Dataset).
    ``scheme`` is any registered scheme; ``statistic`` (SAMark's family only) defaults to
    the scheme's own, and ``cells`` (SAMark's family only: keyed semantic cells, 0 static
    pivots; None: the scheme's default, the key's own for samark-layered) the scheme's
    setting. With ``keyring`` (a ring folder) instead of ``key_path``,
    every key of the ring detects, with family-wise error control, and ``key_label``, ``key_id`` and
    ``payload`` columns name the key that marked each flagged text."""
    if workers < 1 or batch_size < 1:
        raise ValueError("workers and batch_size must be >= 1")
    if (key_path is None) == (keyring is None):
        raise ValueError("give either key_path or keyring")
    params: dict[str, Any] = {"alpha": alpha}
    if statistic is not None:
        params["statistic"] = statistic
    if cells is not None:
        params["cells"] = cells
    return ds.map_batches(
        _ActorDetector,
        fn_constructor_kwargs={
            "key_path": key_path,
            "keyring": keyring,
            "scheme": scheme,
            "field": field,
            "params": params,
            "threads": threads_per_worker,
        },
        batch_size=batch_size,
        batch_format="pandas",
        compute=_actor_pool(workers),
        num_cpus=threads_per_worker,
    )


def _actor_pool(workers: int) -> ActorPoolStrategy:
    import ray.data

    return ray.data.ActorPoolStrategy(size=workers)
