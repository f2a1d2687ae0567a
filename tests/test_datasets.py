"""The human corpora the calibration and the experiments use."""

from __future__ import annotations

import shutil

import pytest

from samark.datasets import human_windows, leading_sentences, load_dataset


def test_jane_austen_chapters_from_debian() -> None:
    if shutil.which("apt-get") is None:
        pytest.skip("the jane_austen corpus comes from a Debian package")
    docs = load_dataset("jane_austen")
    books = {d.id.split("#")[0] for d in docs}
    assert books == {
        "emma",
        "mansfield_park",
        "northanger_abbey",
        "persuasion",
        "pride_and_prejudice",
        "sense_and_sensibility",
    }
    assert len(docs) > 250  # one document per chapter
    assert not any(d.text.lstrip().upper().startswith("CHAPTER") for d in docs)
    first = next(d for d in docs if d.id == "pride_and_prejudice#0")
    assert first.text.startswith("It is a truth universally acknowledged")
    assert len(human_windows(docs, sentences=12, count=3000)) > 2000


def test_debian_handbook_sections_from_debian() -> None:
    if shutil.which("apt-get") is None:
        pytest.skip("the debian_handbook corpus comes from a Debian package")
    docs = load_dataset("debian_handbook")
    assert len(docs) > 400  # one document per section
    assert len({d.id for d in docs}) == len(docs)
    text = "\n".join(d.text for d in docs)
    # prose, not markup or command listings
    assert "<div" not in text and "class=" not in text
    assert "Debian" in text and "package" in text
    assert len(human_windows(docs, sentences=10, count=1000)) > 250


@pytest.mark.parametrize(
    ("name", "least", "words", "left_out"),
    [
        ("fortunes", 1500, ("love", "never"), ("\n%\n",)),
        ("licenses", 60, ("License", "copyright"), ("\f",)),
        ("python_docs", 1500, ("Python", "function"), ("Previous topic", "Next topic")),
        ("reuters", 60, ("pct", "oil", "told Reuters"), ("<BODY>", "&lt;", "Reuter\n")),
    ],
)
def test_more_genres_from_debian_packages(
    name: str, least: int, words: tuple[str, ...], left_out: tuple[str, ...]
) -> None:
    # the per-key benchmark's other genres: documents of prose, distinct ids, no markup,
    # separators or page furniture
    if shutil.which("apt-get") is None:
        pytest.skip(f"the {name} corpus comes from a Debian package")
    docs = load_dataset(name)
    assert len(docs) >= least and len({d.id for d in docs}) == len(docs)
    text = "\n".join(d.text for d in docs)
    assert not any(x in text for x in left_out)
    assert all(w in text for w in words)
    heads = leading_sentences((d.text for d in docs), limit=50, stop=10)
    assert len(heads) == 50 and all(len(h) >= 3 for h in heads)


def test_cnn_dailymail_ships_with_the_package(tmp_path, monkeypatch) -> None:
    """A clone needs nothing beside it: the 200 articles load from the package itself, from
    any working directory."""
    from pathlib import Path

    import samark
    from samark.datasets.loaders import find_data_file

    monkeypatch.delenv("SAMARK_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    path = find_data_file("cnn_dailymail.jsonl")
    assert path.parent == Path(samark.__file__).resolve().parent / "resources" / "data"
    docs = load_dataset("cnn_dailymail")
    assert len(docs) == 200 and all(len(d.text) > 200 for d in docs)


@pytest.mark.parametrize(
    ("name", "cache_name"),
    [("fortunes", "fortunes"), ("licenses", "base-files"), ("reuters", "r-cran-tm")],
)
def test_a_debian_corpus_is_unpacked_once(name: str, cache_name: str) -> None:
    """A second load reads the unpacked package: no new ``apt-get download`` (a probe
    path the package does not hold once sent every load back to the network)."""
    from samark.models import cache_dir

    if shutil.which("apt-get") is None:
        pytest.skip(f"the {name} corpus comes from a Debian package")
    first = load_dataset(name)
    root = cache_dir() / cache_name
    if not root.exists():
        pytest.skip(f"{name} is read from the system's own installed package")
    unpacked = root.stat().st_ino  # unpacking replaces the folder: a new inode
    assert load_dataset(name) == first
    assert root.stat().st_ino == unpacked
