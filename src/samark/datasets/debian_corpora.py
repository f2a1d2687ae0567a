"""More genres of human text from Debian packages, for per-key false-positive checks on
domains far from news, encyclopedia and fiction: quotations and jokes (``fortunes``),
legal text (``licenses``), programming documentation (``python_docs``) and financial
newswire (``reuters``). Each is fetched with ``apt-get download`` into the user cache on
first use (or read where the package is installed), never installed; nothing else is
downloaded."""

from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

from samark.datasets.debian_packages import package_root, unpack_debian_packages
from samark.datasets.registry import Document, register_dataset
from samark.errors import SamarkError
from samark.models import cache_dir
from samark.segment import split_sentences


@register_dataset("fortunes")
def fortunes(min_sentences: int = 3) -> list[Document]:
    """The ``fortunes`` collection (Debian's ``fortunes``, the non-offensive files): one
    document per fortune of at least ``min_sentences`` sentences -- quotations, jokes,
    anecdotes and short dialogues. Attribution lines (``-- Author``) are dropped."""
    relative = "usr/share/games/fortunes"
    # a file of the ``fortunes`` package itself (``fortunes/fortunes`` is fortunes-min's,
    # so probing it sent every call back to ``apt-get download``)
    root = package_root("fortunes", f"{relative}/art", "fortunes")
    docs: list[Document] = []
    for path in sorted((root / relative).iterdir()):
        if path.suffix or path.is_dir() or path.is_symlink():
            continue  # .dat indexes, .u8 links
        raw = path.read_text(encoding="utf-8", errors="replace")
        for i, entry in enumerate(raw.split("\n%\n")):
            lines = [
                line.strip()
                for line in entry.splitlines()
                if line.strip() and not line.strip().startswith(("--", "~~", "%"))
            ]
            text = " ".join(lines)
            if text and len(split_sentences(text)) >= min_sentences:
                docs.append(Document(f"{path.name}#{i}", text))
    if not docs:
        raise SamarkError(f"no fortune found under {root / relative}")
    return docs


#: one text of each family of Debian's common licenses (near-identical versions dropped)
LICENSES = (
    "Apache-2.0",
    "Artistic",
    "CC0-1.0",
    "GFDL-1.3",
    "GPL-2",
    "GPL-3",
    "LGPL-2.1",
    "MPL-2.0",
)


@register_dataset("licenses")
def licenses(sentences: int = 10) -> list[Document]:
    """Legal text: the common free-software licenses that every Debian system carries
    (``/usr/share/common-licenses``, package ``base-files``), one of each family, cut into
    consecutive windows of ``sentences`` sentences (each window one document)."""
    root = package_root("base-files", "usr/share/common-licenses/GPL-3", "base-files")
    docs: list[Document] = []
    for name in LICENSES:
        path = root / "usr/share/common-licenses" / name
        if not path.is_file():
            continue
        paragraphs = re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace"))
        flat = [s for p in paragraphs for s in split_sentences(" ".join(p.split()))]
        flat = [s for s in flat if len(s.split()) >= 4]  # headings, numbering, rules
        for k in range(len(flat) // sentences):
            docs.append(
                Document(f"{name}#{k}", " ".join(flat[k * sentences : (k + 1) * sentences]))
            )
    if not docs:
        raise SamarkError(f"no license text found under {root / 'usr/share/common-licenses'}")
    return docs


def _python_doc_package() -> str:
    """Debian's versioned package of the Python documentation (``python3.X-doc``)."""
    if shutil.which("apt-cache") is None:
        raise SamarkError("python_docs needs Debian's apt-cache to find python3-doc's package")
    out = subprocess.run(
        ["apt-cache", "depends", "python3-doc"], capture_output=True, text=True, check=False
    ).stdout
    found = re.search(r"Depends:\s*(python3\.\d+-doc)", out)
    if not found:
        raise SamarkError("apt-cache found no python3.X-doc package (run apt-get update)")
    return found.group(1)


@register_dataset("python_docs")
def python_docs() -> list[Document]:
    """Programming documentation: the Python documentation's tutorial, how-tos, FAQ,
    language and library reference (Debian's ``python3.X-doc``, English HTML), one
    document per section, paragraph text only (code blocks and tables dropped)."""
    base = None
    for root in (Path("/"), cache_dir() / "python-doc"):
        found = sorted(root.glob("usr/share/doc/python3.*/html/library"))
        if found:
            base = found[-1].parent
            break
    if base is None:
        root = unpack_debian_packages((_python_doc_package(),), "python-doc")
        found = sorted(root.glob("usr/share/doc/python3.*/html/library"))
        if not found:
            raise SamarkError(f"no Python documentation found under {root}")
        base = found[-1].parent
    docs: list[Document] = []
    for part in ("tutorial", "howto", "faq", "reference", "library"):
        for page in sorted((base / part).glob("*.html")):
            parser = _SectionParagraphs()
            parser.feed(page.read_text(encoding="utf-8", errors="replace"))
            parser.close()
            docs.extend(
                Document(f"{part}/{page.stem}#{i}", "\n\n".join(paras))
                for i, paras in enumerate(parser.sections)
                if paras
            )
    return docs


class _SectionParagraphs(HTMLParser):
    """``<p>`` text of a Sphinx page, split at its headings; code blocks and tables left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[list[str]] = [[]]
        self.in_p = 0
        self.hidden = 0
        self.text: list[str] = []
        self.done = False  # past the page body (Sphinx's sidebar and footer follow it)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div" and ("sphinxsidebar" in classes or "footer" in classes):
            self.done = True
        if self.done:
            return
        if tag == "p":
            self.in_p, self.text = 1, []
        elif tag in ("pre", "table"):
            self.hidden += 1
        elif tag in ("h1", "h2", "h3", "h4"):
            self.sections.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self.in_p:
            paragraph = " ".join("".join(self.text).split())
            if len(paragraph.split()) >= 5:
                self.sections[-1].append(paragraph)
            self.in_p = 0
        elif tag in ("pre", "table"):
            self.hidden = max(0, self.hidden - 1)

    def handle_data(self, data: str) -> None:
        if self.in_p and not self.hidden:
            self.text.append(data)


@register_dataset("reuters")
def reuters() -> list[Document]:
    """Financial newswire from 1987: the Reuters-21578 articles on acquisitions and crude
    oil that R's text-mining package ships (Debian's ``r-cran-tm``), one document each."""
    relative = "usr/lib/R/site-library/tm/texts"
    root = package_root("r-cran-tm", f"{relative}/acq", "r-cran-tm")
    docs: list[Document] = []
    for folder in ("acq", "crude"):
        for path in sorted((root / relative / folder).glob("*.xml")):
            raw = path.read_text(encoding="utf-8", errors="replace")
            body = re.search(r"<BODY>(.*?)</BODY>", raw, flags=re.S)
            if body:
                # the wire's sign-off ("... Reuter") ends each body
                body_text = re.sub(r"\s*Reuter\s*$", "", unescape(body.group(1)))
                text = " ".join(body_text.split())
                docs.append(Document(f"{folder}/{path.stem}", text))
    if not docs:
        raise SamarkError(f"no article found under {root / relative}")
    return docs
