"""The detection page (``GET /``) used as a person uses it: Debian's headless Chromium,
driven by Playwright (pointed at the system browser: nothing downloads one), against the
real app on loopback with a real SAMark detector (mpnet). Paste, upload, read the verdict
and the highlighted sentences, the record's states, a keyring's key and payload, the
decision-only view, the budget, the errors, the keyboard; and ``samark page``, the local
mode, in its own process.

``SAMARK_PAGE_SCREENSHOT=docs/images/detection-page.png`` makes the record's test save
the page it reads (the screenshot in docs/serving.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the page is served by samark[server]")
pytest.importorskip("uvicorn", reason="the page is served by samark[server]")
pytest.importorskip("playwright", reason="pip install playwright (samark[test])")

from playwright import sync_api

from samark import SAMark, SAMarkConfig
from samark.detection_result import Detection
from samark.models import DEFAULT_GENERATOR, resolve_generator
from samark.provenance import ProvenanceRecord
from samark.segment import split_sentences
from samark.serving import ServeSettings
from samark.serving.app import scheme_app

CHROMIUM = Path("/usr/bin/chromium")

#: the page's evidence levels: a sentence's p-value below each bound
LEVELS = (("strong", 0.01), ("some", 0.05), ("weak", 0.2), ("none", 2.0))
#: the request id under which the record served the marked text
REQUEST = "req-0f3a9c2e"
USER = "user-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
HUMAN = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked "
    "for more money for parks and libraries. The mayor said the plan balances those needs. "
    "Opponents argued that taxes would rise next year. The vote was five to two."
)
#: the browser as the tests run it: no GPU, no network of its own, a fresh profile
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


@pytest.fixture(scope="module")
def scheme(mpnet, mpnet_key) -> SAMark:
    """What ``samark serve`` detects with: SAMark under the test key, the scan statistic."""
    return SAMark(mpnet_key, config=SAMarkConfig(statistic="scan"), embedder=mpnet)


@pytest.fixture(scope="module")
def marked_detection(scheme, news_leads) -> Detection:
    """A marked text of up to 12 news sentences, chosen by SAMark's own selection (its
    ``begin`` / ``pick`` / ``chosen`` hooks) among pools of human sentences, as it
    chooses among a language model's candidates (the pools' embeddings are the
    calibration store's), and its detection."""
    texts, stored = news_leads
    sentences = list(stored) or [s for t in texts for s in split_sentences(t)][:768]
    vectors = (
        np.stack([stored[s] for s in sentences]) if stored else scheme.embedder.encode(sentences)
    )
    size = len(sentences) // 12
    state = scheme.begin("The news of the day.", np.random.default_rng(0))
    chosen = []
    for step in range(12):
        pool = vectors[step * size : (step + 1) * size]
        candidates = sentences[step * size : (step + 1) * size]
        pick = scheme.pick(state, candidates, pool)
        if pick is not None:
            scheme.chosen(state, candidates[pick.index], pool[pick.index], pool, pick)
            chosen.append(candidates[pick.index])
    detection = scheme.detect(" ".join(chosen))
    assert detection.is_watermarked, "the fixture's text should carry the mark"
    return detection


@pytest.fixture(scope="module")
def marked(marked_detection) -> str:
    return " ".join(marked_detection.sentences)


@pytest.fixture(scope="module")
def record(mpnet, mpnet_key, marked, tmp_path_factory) -> Iterator[ProvenanceRecord]:
    """An operator's record (SQLite) that served the marked text, as request ``REQUEST``."""
    url = f"sqlite:///{tmp_path_factory.mktemp('record') / 'served.db'}"
    with ProvenanceRecord.open(url, mpnet_key, mpnet) as opened:
        opened.record_text(marked, request_id=REQUEST)
        yield opened


def _words(text: str) -> int:
    """A token count that needs no generator (these servers only detect)."""
    return len(text.split())


@pytest.fixture(scope="module")
def servers(scheme, record, marked, served_app) -> Iterator[dict[str, str]]:
    """Two servers of one scheme: ``full`` (user tokens get p-values, admins the sentence
    evidence and its provenance in the record too) and ``public`` (``--detect-output
    decision``, a budget of the marked text's and one human text's sentences, no record)."""
    full = ServeSettings(tokens=frozenset({USER}), admin_tokens=frozenset({ADMIN}))
    public = ServeSettings(
        tokens=frozenset({USER}),
        admin_tokens=frozenset({ADMIN}),
        detect_output="decision",
        detect_budget=len(split_sentences(marked)) + len(split_sentences(HUMAN)),
    )
    with (
        served_app(scheme_app(scheme, full, record=record, count_tokens=_words)) as a,
        served_app(scheme_app(scheme, public, count_tokens=_words)) as b,
    ):
        yield {"full": a, "public": b}


@pytest.fixture(scope="module")
def ringed(scheme, mpnet, mpnet_key, served_app, tmp_path_factory) -> Iterator[str]:
    """A keyring server (two keys, so a 1-bit payload), the test key second: the marked
    text is the key ``tenant-b``'s, payload 1."""
    from samark.detection.ring_detector import RingDetector
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring
    from samark.models import DEFAULT_GENERATOR
    from samark.schemes.base import SharedResources
    from samark.serving import Keys

    ring = Keyring.create(tmp_path_factory.mktemp("page-ring") / "ring", mpnet.identity)
    ring.add(WatermarkKey(bytes([77]) * 32, mpnet.identity), "tenant-a")
    ring.add(mpnet_key, "tenant-b")
    detector = RingDetector.from_ring(
        ring, shared=SharedResources(DEFAULT_GENERATOR, mpnet), statistic="scan"
    )
    settings = ServeSettings(tokens=frozenset({USER}))
    keys = Keys(label="tenant-b", ring=detector)
    with served_app(scheme_app(scheme, settings, keys=keys, count_tokens=_words)) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            "Debian's chromium is not installed (apt-get install chromium): "
            "the page is tested in a real browser"
        )
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            accept_downloads=True,
            viewport={"width": 900, "height": 1000},
        )
        yield context
        context.close()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    """A fresh tab that records every request it makes and every script error."""
    tab = browser.new_page()
    tab.requests = []
    tab.errors = []
    tab.on("request", lambda r: tab.requests.append(r.url))
    tab.on("pageerror", lambda e: tab.errors.append(str(e)))
    yield tab
    assert not tab.errors, tab.errors
    tab.close()


def _check(page: Any, text: str | None = None, token: str | None = None) -> None:
    if token is not None:
        page.fill("#token", token)
    if text is not None:
        page.fill("#text", text)
    page.click("#submit")
    page.wait_for_selector("#results:not([hidden]), #error:not([hidden])")


def _upload(page: Any, path: Path) -> None:
    """Choose ``path`` in the file field and wait for the page to read it (a note) or
    refuse it (the error)."""
    page.set_input_files("#file", str(path))
    page.wait_for_selector("#file-note:not([hidden]), #error:not([hidden])")


def _save_screenshot(page: Any, path: Path) -> None:
    """The whole page at 820 px, in 256 colours (a third of the bytes, the same look)."""
    from PIL import Image

    page.set_viewport_size({"width": 820, "height": 1000})
    page.screenshot(path=str(path), full_page=True)
    shot = Image.open(path).convert("RGB")
    shot.quantize(256, dither=Image.Dither.NONE).save(path, optimize=True)


def _download_report(page: Any, folder: Path) -> dict[str, Any]:
    """The report the page's download button saves."""
    with page.expect_download() as download:
        page.click("#download")
    saved = folder / "report.json"
    download.value.save_as(saved)
    return dict(json.loads(saved.read_text()))


def _facts(page: Any) -> dict[str, str]:
    terms = page.locator(".report .facts dt").all_inner_texts()
    values = page.locator(".report .facts dd").all_inner_texts()
    return dict(zip(terms, values, strict=True))


def test_a_pasted_marked_text_reads_marked_with_its_sentences_highlighted(
    page, servers, marked, marked_detection, mpnet_key, tmp_path
) -> None:
    base = servers["full"]
    page.goto(f"{base}/#token={ADMIN}")
    assert page.url == f"{base}/"  # the token left the address at once
    assert page.input_value("#token") == ADMIN
    _check(page, marked)
    assert page.inner_text(".verdict").startswith("Marked")
    facts = _facts(page)
    expected = marked_detection
    assert float(facts["p-value"]) == pytest.approx(expected.p_value, rel=0.05)
    assert facts["Key"] == f"id {mpnet_key.key_id}"
    assert facts["Length"] == f"{expected.n_units} sentences"
    items = page.locator(".sentences li")
    assert items.count() == expected.n_units
    levels = [items.nth(i).get_attribute("data-evidence") for i in range(items.count())]
    for p, seen in zip(expected.sentence_p_values, levels, strict=True):
        assert seen == (
            "strong" if p < 0.01 else "some" if p < 0.05 else "weak" if p < 0.2 else "none"
        )
    assert sum(lv in ("strong", "some") for lv in levels) >= len(levels) // 2
    assert items.nth(0).inner_text().startswith(expected.sentences[0])
    # the plot: one bar per sentence
    assert page.locator("svg.plot rect").count() == expected.n_units
    # the record served this very text
    assert {items.nth(i).get_attribute("data-state") for i in range(items.count())} == {"served"}
    n = expected.n_units
    assert facts["Served record"].startswith(f"{n} of {n} sentences served verbatim, 0 a close")
    # the JSON report is the server's answer
    report = _download_report(page, tmp_path)
    assert report["source"] == "pasted text" and report["results"][0]["is_watermarked"] is True
    assert report["results"][0]["sentences"] == list(expected.sentences)
    assert report["results"][0]["provenance"]["requests"] == [REQUEST]
    # nothing but this server was asked; the page's own source holds no secret
    assert page.requests and all(url.startswith(base) for url in page.requests)
    assert ADMIN not in page.content()


def test_an_edited_served_text_shows_which_sentences_were_served_edited_or_inserted(
    page, servers, marked_detection
) -> None:
    """The served text with its second sentence edited and a sentence inserted after its
    third: the record vouches for the rest, names the edited one's request, and knows
    nothing of the inserted one; the mark still holds."""
    served = list(marked_detection.sentences)
    edited = served[1].rstrip(".") + ", officials said on Monday."
    inserted = "The company denied any wrongdoing and said it would appeal the ruling."
    checked = [served[0], edited, served[2], inserted, *served[3:]]
    page.goto(servers["full"])
    _check(page, " ".join(checked), token=ADMIN)
    items = page.locator(".sentences li")
    states = [items.nth(i).get_attribute("data-state") for i in range(items.count())]
    assert states == ["served", "paraphrase", "served", "not_served"] + ["served"] * (
        len(served) - 3
    )
    said = items.nth(1).locator(".meta").inner_text()
    assert f"close paraphrase of a served sentence (request {REQUEST}," in said
    assert items.nth(3).locator(".meta").inner_text().endswith("not served")
    facts = _facts(page)
    assert facts["Served record"] == (
        f"{len(served) - 1} of {len(checked)} sentences served verbatim, "
        "1 a close paraphrase of a served sentence, 1 not served"
    )
    assert page.inner_text(".verdict").startswith("Marked")
    if os.environ.get("SAMARK_PAGE_SCREENSHOT"):
        _save_screenshot(page, Path(os.environ["SAMARK_PAGE_SCREENSHOT"]))


def test_a_keyring_server_names_the_key_and_payload_beside_a_family_wise_p(
    page, ringed, marked, mpnet_key
) -> None:
    page.goto(ringed)
    _check(page, marked, token=USER)
    assert page.inner_text(".verdict").startswith("Marked")
    facts = _facts(page)
    assert facts["Family-wise p-value"].endswith("(over the 2 keys of the keyring)")
    assert 0 < float(facts["Family-wise p-value"].split()[0]) < 0.01
    assert facts["Key"] == f"tenant-b (id {mpnet_key.key_id})"
    assert facts["Payload"] == "1"


def test_human_text_reads_not_marked_and_a_user_token_gets_no_sentence_evidence(
    page, servers
) -> None:
    page.goto(servers["full"])
    _check(page, HUMAN, token=USER)
    assert page.inner_text(".verdict").startswith("Not marked")
    assert 0.01 <= float(_facts(page)["p-value"]) <= 1
    assert "admin tokens only" in page.inner_text(".report")
    assert page.locator(".sentences li").count() == 0


def test_an_uploaded_txt_file_is_checked(page, servers, tmp_path) -> None:
    article = tmp_path / "article.txt"
    article.write_text(HUMAN)
    page.goto(servers["full"])
    page.fill("#token", ADMIN)
    _upload(page, article)
    assert page.input_value("#text") == HUMAN
    assert page.inner_text("#file-note") == "article.txt is in the text box."
    _check(page)
    assert page.inner_text(".verdict").startswith("Not marked")
    assert page.locator(".sentences li").count() == 5


def test_an_uploaded_jsonl_file_is_checked_record_by_record(
    page, servers, marked, tmp_path
) -> None:
    records = tmp_path / "runs.jsonl"
    lines = [{"id": 1, "text": marked}, {"id": 2, "text": HUMAN}]
    records.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    page.goto(servers["full"])
    page.fill("#token", USER)
    _upload(page, records)
    assert "2 records read from runs.jsonl" in page.inner_text("#file-note")
    _check(page)
    cards = page.locator(".report")
    assert cards.count() == 2
    assert cards.nth(0).locator("h3").inner_text() == "Record 1 of 2"
    assert cards.nth(0).locator(".verdict").inner_text().startswith("Marked")
    assert cards.nth(1).locator(".verdict").inner_text().startswith("Not marked")
    # a user token's report: p-values, but neither sentence evidence nor the record's
    report = _download_report(page, tmp_path)
    assert report["source"] == "runs.jsonl" and len(report["results"]) == 2
    for result in report["results"]:
        assert 0 < result["p_value"] <= 1
        assert "sentences" not in result and "provenance" not in result


def test_a_decision_only_token_sees_only_the_decision_and_its_budget(page, servers, marked) -> None:
    """At phone width: the decision, no p-value, no sentence; the third text in an hour
    is refused with the budget's message."""
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(servers["public"])
    _check(page, marked, token=USER)
    assert page.inner_text(".verdict").startswith("Marked")
    facts = _facts(page)
    assert "p-value" not in facts and "decision only" in page.inner_text(".report")
    assert page.locator(".sentences li, svg.plot").count() == 0
    assert set(facts) == {"Significance level", "Key", "Length", "Scheme"}
    # readable at phone width: nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    _check(page, HUMAN)
    assert page.inner_text(".verdict").startswith("Not marked")
    _check(page, HUMAN)
    assert page.is_visible("#error") and "budget is spent" in page.inner_text("#error")
    assert page.is_hidden("#results")


def test_an_empty_or_binary_upload_or_nothing_gives_a_visible_error(
    page, servers, tmp_path
) -> None:
    page.goto(servers["full"])
    page.fill("#token", USER)
    uploads = {
        "empty.txt": (b"", "is empty"),
        "photo.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "not a text file"),
        "latin1.txt": ("Café crème".encode("latin-1"), "not a text file"),
        "bad.jsonl": (b'{"text": "One sentence."}\nnot json\n', "line 2: not a JSON record"),
        "fields.jsonl": (b'{"body": "One sentence."}\n', 'needs a "text" field'),
    }
    for name, (content, message) in uploads.items():
        path = tmp_path / name
        path.write_bytes(content)
        _upload(page, path)
        assert page.is_visible("#error"), name
        assert message in page.inner_text("#error"), name
        assert page.input_value("#file") == ""  # the file is not kept
    page.fill("#text", "   ")
    page.click("#submit")
    assert "nothing to check" in page.inner_text("#error")
    assert page.is_hidden("#results")


def test_the_keyboard_alone_checks_a_text(page, servers) -> None:
    """Tab through the form in reading order, with a visible focus ring, and submit with
    Enter; the result takes the focus."""
    page.goto(servers["full"])
    order = []
    for _ in range(4):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.id"))
        if order[-1] == "text":
            page.keyboard.insert_text(HUMAN)
        if order[-1] == "token":
            page.keyboard.type(USER)
    assert order == ["text", "file", "token", "submit"]
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Enter")
    page.wait_for_selector("#results:not([hidden])")
    assert page.inner_text(".verdict").startswith("Not marked")
    assert page.evaluate("document.activeElement.id") == "results-title"
    # labels name every field
    for field in ("text", "file", "token"):
        assert page.locator(f"label[for={field}]").count() == 1


@pytest.mark.slow
def test_samark_page_serves_the_page_locally_with_its_token(page, mpnet_key, tmp_path) -> None:
    """``samark page --no-browser --port 0`` in its own process: it prints the address
    (127.0.0.1, the one-time token after '#'), that address checks a text in full, and
    no generator was loaded."""
    key = tmp_path / "my.key"
    mpnet_key.save(key)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "samark", "page", "--key", str(key)]
    proc = subprocess.Popen(
        [*command, "--no-browser", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        address = None
        for line in proc.stderr:
            found = re.search(r"http://127\.0\.0\.1:\d+/#token=\S+", line)
            if found:
                address = found.group(0)
                break
        assert address, "samark page printed no address"
        page.goto(address)
        _check(page, HUMAN)
        assert page.inner_text(".verdict").startswith("Not marked")
        assert page.locator(".sentences li").count() == 5  # the one caller sees it all
        # detection only: the generator's weights were never opened (mapped)
        _, weights = resolve_generator(DEFAULT_GENERATOR)
        assert str(weights) not in Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_samark_page_refuses_a_taken_port_and_a_bad_alpha_before_loading_anything() -> None:
    import socket

    from typer.testing import CliRunner

    from samark.cli import app

    key = str(Path(__file__).parent / "data" / "keys" / "plain.key")  # the options fail first
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        out = CliRunner().invoke(app, ["page", "--key", key, "--port", str(port)])
    assert out.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in out.output
    out = CliRunner().invoke(app, ["page", "--key", key, "--alpha", "1.5"])
    assert out.exit_code == 2 and "--alpha must be between 0 and 1" in out.output


def test_samark_page_takes_its_port_again_right_after_a_run() -> None:
    """The last run's connections, closed by the server, wait out TIME_WAIT on the port
    for a minute: a restart at once must still listen there (Ctrl-C, then again)."""
    import socket

    from samark.cli.page import _listener

    first = _listener(0)
    first.listen()
    port = first.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = first.accept()
    served.close()  # the server closes first: its side waits in TIME_WAIT
    client.close()
    first.close()
    _listener(port).close()


def test_samark_page_gives_the_browser_no_token_on_its_command_line(
    page, servers, tmp_path
) -> None:
    """Every user of the machine reads a process's command line (ps): the browser is given
    a file of this user's that leads to the address, and that file opens the page with
    its token in the field."""
    address = f"{servers['full']}/#token={ADMIN}"
    browser = tmp_path / "browser.sh"
    argv = tmp_path / "argv.txt"
    browser.write_text(f'#!/bin/sh\necho "$@" > {argv}\n')
    browser.chmod(0o755)
    opener = tmp_path / "opener"
    opener.mkdir()
    opened = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from samark.cli.page import _open_browser; "
            "print(_open_browser(sys.argv[1], __import__('pathlib').Path(sys.argv[2])))",
            address,
            str(opener),
        ],
        env={**os.environ, "BROWSER": str(browser)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert opened.stdout.strip() == "True"
    given = argv.read_text().strip()
    assert ADMIN not in given and given.startswith("file://")
    assert (opener / "open.html").stat().st_mode & 0o077 == 0  # this user's alone
    page.goto(given)
    page.wait_for_url(f"{servers['full']}/")
    assert page.input_value("#token") == ADMIN


def test_a_pasted_text_that_is_html_is_shown_as_text_and_runs_nothing(page, servers) -> None:
    """Every text the page shows (the sentences, the server's messages) is set as text:
    markup in a pasted text is shown as typed, and the CSP would stop its script anyway."""
    attack = (
        "<img src=x onerror=\"document.title='ran'\"> The committee met on Friday. "
        "<script>document.title='ran'</script> It <b>agreed</b> to publish the report."
    )
    response = page.goto(servers["full"])
    assert "script-src 'self'" in response.headers["content-security-policy"]
    _check(page, attack, token=ADMIN)
    shown = page.locator(".sentences .said").all_inner_texts()
    assert "".join(shown).count("<") == attack.count("<")  # every tag shown as typed
    assert page.locator("#results img, #results script, #results b").count() == 0
    assert page.title() != "ran"
