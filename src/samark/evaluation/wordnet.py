"""WordNet for nltk, from Debian's ``wordnet-base`` package (nothing from nltk's downloader).

``install_wordnet()`` (run by ``samark models install``) fetches ``wordnet-base`` and
``wordnet-sense-index`` with ``apt-get download`` (no root needed) and unpacks them into the
user cache, unless the system already has ``/usr/share/wordnet``. ``load_wordnet()`` lays the
files out as nltk expects (``corpora/wordnet/``, with the ``lexnames`` file Debian omits).
"""

from __future__ import annotations

import functools
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from samark.datasets.debian_packages import unpack_debian_packages
from samark.errors import SamarkError
from samark.models import cache_dir

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

SYSTEM_DIR = Path("/usr/share/wordnet")
PACKAGES = ("wordnet-base", "wordnet-sense-index")
_NEEDED = ("data.noun", "index.noun", "data.verb", "data.adj", "data.adv", "index.sense")
# WordNet 3.0's 45 lexicographer files, in their numbered order (Debian omits the file)
_LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)
_POS_NUMBER = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _NEEDED)


def wordnet_source() -> Path | None:
    """The folder holding WordNet's dict files, or None if not installed."""
    for folder in (SYSTEM_DIR, cache_dir() / "wordnet" / "usr" / "share" / "wordnet"):
        if _complete(folder):
            return folder
    return None


def install_wordnet() -> Path:
    """Make WordNet available; returns its dict folder."""
    found = wordnet_source()
    if found:
        return found
    unpack_debian_packages(PACKAGES, "wordnet")
    found = wordnet_source()
    if found is None:
        raise SamarkError("the WordNet packages did not contain the expected files")
    return found


def _nltk_root(source: Path) -> Path:
    """An nltk data root whose corpora/wordnet holds ``source``'s files (copied once:
    nltk refuses symlinks and hard links that could leave its root)."""
    root = cache_dir() / "nltk_data"
    folder = root / "corpora" / "wordnet"
    folder.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        link = folder / f.name
        if not link.exists():
            shutil.copyfile(f, link)
    lex = folder / "lexnames"
    if not lex.exists():
        lines = [
            f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}"
            for i, name in enumerate(_LEXNAMES)
        ]
        lex.write_text("\n".join(lines) + "\n")
    return root


@functools.lru_cache(maxsize=1)
def load_wordnet() -> WordNetCorpusReader:
    """nltk's WordNet reader over the Debian files."""
    source = wordnet_source()
    if source is None:
        raise SamarkError("WordNet is not installed; run `samark models install`")
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = _nltk_root(source)
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))  # nltk reads only from its data path
    with warnings.catch_warnings():  # "multilingual functions are not available": expected
        warnings.simplefilter("ignore", UserWarning)
        return WordNetCorpusReader(str(root / "corpora" / "wordnet"), None)
