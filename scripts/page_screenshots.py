"""Screenshots of the detection page in each of its states, in Debian's headless Chromium
(Playwright pointed at /usr/bin/chromium), against the real app served as the page's tests
serve it (uvicorn in a thread on a loopback port), with the layered mark under the tests'
public key (``tests/conftest.py``'s ``mpnet_key``: no secret).

    OMP_NUM_THREADS=1 python scripts/page_screenshots.py docs/results/2026-11-28-page

The marked text is the layered mark's own output (smollm2-135m-instruct, 8 candidates a
sentence, seed 2), written once to ``marked.txt`` in the folder and read from there after
(``--regenerate`` writes it again; generation takes a few CPU minutes). The record
(SQLite, in a temporary folder) served it as one request. States: ``marked.png`` (the
served text), ``edited.png`` (two words of its first sentence changed, a sentence inserted
after its third; the record's requests unfolded), ``human.png`` (a human news text),
``phone.png`` (the marked text at 375 px).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the tests' key (tests/conftest.py): public, made for tests and these pictures
TEST_SECRET = b"samark-test-key-0000000000000000"
ADMIN = "admin-token-screenshots-0123456789"
#: a completion id as `samark serve` writes one (``chatcmpl-`` and 24 hex digits)
REQUEST = "chatcmpl-5f0c2a9e31d84b7a6c0e9f12"
PROMPT = "Scientists have found a new species of frog in the rainforests of Peru."
HUMAN = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked "
    "for more money for parks and libraries. The mayor said the plan balances those needs. "
    "Opponents argued that taxes would rise next year. The vote was five to two. "
    "Work on the new library is due to start in the spring."
)
INSERTED = "The company denied any wrongdoing and said it would appeal the ruling."
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` on a free loopback port, in a thread, for the block (as the tests'
    ``served_app`` fixture); yields the base URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 60
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def marked_text(folder: Path, key: Any, embedder: Any, regenerate: bool) -> str:
    """The layered mark's text for the pictures: ``marked.txt`` in ``folder``, written
    first where it is missing (or with ``regenerate``)."""
    saved = folder / "marked.txt"
    if saved.exists() and not regenerate:
        return saved.read_text().strip()
    from samark.schemes import create_scheme

    writer = create_scheme("samark-layered", key=key, embedder=embedder, candidates=8)
    text = writer.generate(PROMPT, max_new_sentences=8, seed=2).text.strip()
    saved.write_text(text + "\n")
    return text


def save(page: Any, path: Path, width: int) -> None:
    """The whole page at ``width`` px, in 256 colours (a third of the bytes, the same look)."""
    from PIL import Image

    page.set_viewport_size({"width": width, "height": 1000})
    page.wait_for_timeout(300)  # the charts redraw at the new width
    page.screenshot(path=str(path), full_page=True)
    shot = Image.open(path).convert("RGB")
    shot.quantize(256, dither=Image.Dither.NONE).save(path, optimize=True)
    print(f"wrote {path}")


def check(page: Any, text: str) -> None:
    page.fill("#text", text)
    page.click("#submit")
    page.wait_for_selector("#results:not([hidden]), #error:not([hidden])")
    if page.is_visible("#error"):
        raise RuntimeError(page.inner_text("#error"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--regenerate", action="store_true", help="write marked.txt again")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)

    from playwright import sync_api

    from samark.embed import load_embedder
    from samark.keys import WatermarkKey
    from samark.provenance import ProvenanceRecord
    from samark.schemes import create_scheme
    from samark.segment import split_sentences
    from samark.serving import ServeSettings
    from samark.serving.app import scheme_app

    mpnet = load_embedder("all-mpnet-base-v2")
    key = WatermarkKey(TEST_SECRET, mpnet.identity)
    marked = marked_text(args.folder, key, mpnet, args.regenerate)
    sentences = split_sentences(marked)
    # the first sentence edited (two words), a sentence inserted after the third
    first = sentences[0].replace("in different parts", "in other parts")
    edited = [first, *sentences[1:3], INSERTED, *sentences[3:]]
    scheme = create_scheme("samark-layered", key=key, embedder=mpnet)
    settings = ServeSettings(admin_tokens=frozenset({ADMIN}))
    with (
        tempfile.TemporaryDirectory() as tmp,
        ProvenanceRecord.open(f"sqlite:///{tmp}/served.db", key, mpnet) as record,
    ):
        record.record_text(marked, request_id=REQUEST)
        app = scheme_app(scheme, settings, record=record, count_tokens=lambda t: len(t.split()))
        with served(app) as base, sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport={"width": 820, "height": 1000})
            # as `samark page` opens it: the token after '#', kept for the tab from then on
            page.goto(f"{base}/#token={ADMIN}")
            for name, text in (
                ("marked", marked),
                ("edited", " ".join(edited)),
                ("human", HUMAN),
            ):
                page.reload()
                check(page, text)
                if name == "edited":  # the requests the record found, unfolded
                    page.click("details.requests summary")
                save(page, args.folder / f"{name}.png", 820)
            page.reload()
            page.set_viewport_size({"width": 375, "height": 800})
            check(page, marked)
            save(page, args.folder / "phone.png", 375)
            browser.close()


if __name__ == "__main__":
    main()
