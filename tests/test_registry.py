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
