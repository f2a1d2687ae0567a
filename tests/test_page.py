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
from samark.verdict import SHORT_TEXT_SENTENCES

CHROMIUM = Path("/usr/bin/chromium")

#: the page shades a sentence whose own p-value is below this, and no other
SHADE_P = 0.01
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
    return SAMark(mpnet_key, config=SAMarkConfig.of(statistic="scan"), embedder=mpnet)


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


def _save_screenshot(page: Any, path: Path, width: int = 820) -> None:
    """The whole page at ``width`` px, in 256 colours (a third of the bytes, the same look)."""
    from PIL import Image

    page.set_viewport_size({"width": width, "height": 1000})
    page.wait_for_timeout(200)  # the charts redraw after a resize
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
    # the mark and the record as one story: served here, and marked
    assert page.inner_text(".verdict") == "Served by this server, and marked"
    facts = _facts(page)
    expected = marked_detection
    assert float(facts["p-value"]) == pytest.approx(expected.p_value, rel=0.05)
    assert facts["Key"] == f"id {mpnet_key.key_id}"
    assert facts["Length"] == f"{expected.n_units} sentences"
    items = page.locator(".sentences li")
    assert items.count() == expected.n_units
    # shaded exactly where the sentence alone has p below SHADE_P
    levels = [items.nth(i).get_attribute("data-evidence") for i in range(items.count())]
    for p, seen in zip(expected.sentence_p_values, levels, strict=True):
        assert seen == ("mark" if p < SHADE_P else "none")
    assert items.nth(0).inner_text().startswith(expected.sentences[0])
    # each sentence's part: one bar per sentence (one layer)
    assert page.locator(".parts svg.plot rect.bar").count() == expected.n_units
    # the record served this very text: said at the top, in words
    assert {items.nth(i).get_attribute("data-state") for i in range(items.count())} == {"served"}
    n = expected.n_units
    verdict = page.locator(".one-verdict")
    assert verdict.get_attribute("data-verdict") == "marked.served"
    assert f"The record: {n} of {n} sentences served verbatim" in verdict.inner_text()
    # the request id is folded away: in one closed <details>, on no sentence's line
    assert REQUEST not in page.inner_text(".sentences")
    assert page.locator("details.requests").get_attribute("open") is None
    assert page.is_hidden("details.requests li")
    page.click("details.requests summary")
    assert page.inner_text("details.requests li").startswith(f"{REQUEST} (")
    assert page.inner_text("details.requests li").endswith(f"sentences 1–{n} verbatim")
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
    said = items.nth(1).locator(".badge").inner_text()
    assert said.startswith("close paraphrase of a served sentence (cosine 0.")
    assert items.nth(3).locator(".badge").inner_text() == "not served"
    # the verdict in words at the top, the counts under it; the request once, folded
    verdict = page.locator(".one-verdict")
    assert verdict.get_attribute("data-verdict") == "marked.paraphrase"
    assert verdict.locator(".verdict").inner_text() == (
        "Edited from a text this server served, and marked"
    )
    assert verdict.locator(".verdict-reasons li").last.inner_text() == (
        f"The record: {len(served) - 1} of {len(checked)} sentences served verbatim, "
        "1 a close paraphrase of a served sentence, 1 not served."
    )
    assert REQUEST not in page.inner_text(".sentences")
    page.click("details.requests summary")
    assert page.inner_text("details.requests li").endswith(
        f"sentences 1, 3, 5–{len(checked)} verbatim; sentence 2 as a close paraphrase"
    )
    # how far the record sees through a light edit: the measured shares, in words
    from samark.provenance.threshold import EDITED_FOUND

    band = page.inner_text(".edited-band")
    assert band.startswith("A light edit can hide a served sentence.")
    assert "(cosine 0.905)" in band and band.endswith('the others read "not served".')
    shares = EDITED_FOUND["all-mpnet-base-v2"]
    assert f"finds {round(shares['word-s-5'] * 100)}% of the served sentences changed" in band
    for kind in ("word-s-15", "word-d-5", "word-d-15"):
        assert f"{round(shares[kind] * 100)}%" in band, kind
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
    # an admin's check reads the record too: neither marked nor served here
    assert page.inner_text(".verdict") == "Not from this server"
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
        # the words of samark.intake, as `samark detect` and /v1/detect say them
        "photo.txt": (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
            "photo.txt is binary, not text (it holds the control character U+0000)",
        ),
        "bell.txt": (
            b"Ring.\x07",
            "bell.txt is binary, not text (it holds the control character U+0007)",
        ),
        "latin1.txt": ("Café crème".encode("latin-1"), "latin1.txt is not UTF-8 text"),
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
    # pasted control characters: refused as the CLI and the server refuse them
    page.fill("#text", "\u0000\u0001\u0002")
    page.click("#submit")
    page.wait_for_selector("#error:has-text('is binary')")
    assert page.inner_text("#error") == (
        "Not checked: the text is binary, not text (it holds the control character U+0000)."
    )
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


def _report_of(page: Any, folder: Path) -> dict[str, Any]:
    """The server's answer for the one text checked (the downloaded report's)."""
    return dict(_download_report(page, folder)["results"][0])


def test_the_evidence_adds_up_as_the_detector_scores_each_first_k_sentences(
    page, servers, scheme, marked_detection, tmp_path
) -> None:
    """The cumulative-evidence view: each point is the detector's own p-value of the
    text's first k sentences (scored here again, apart from the server), the last is
    the text's, and the words under the heading say where it crosses the decision level;
    on a human text they say it never does. The chart fits its card at any width."""
    sentences = list(marked_detection.sentences)
    n = len(sentences)
    page.goto(servers["full"])
    _check(page, " ".join(sentences), token=ADMIN)
    answer = _report_of(page, tmp_path)
    trail = answer["evidence_trail"]
    assert [point["sentences"] for point in trail] == list(range(1, n + 1))
    for k, point in enumerate(trail, start=1):
        alone = scheme.detect(" ".join(sentences[:k])).p_value
        assert point["p_value"] == pytest.approx(alone, rel=0.05, abs=2e-3), k
    assert trail[-1]["p_value"] == answer["p_value"]
    assert ("short_text" in answer) == (n < SHORT_TEXT_SENTENCES)  # its line, in the JSON
    # drawn: one point a prefix, each titled with its p-value
    view = page.locator("section.trail")
    assert view.get_attribute("data-points") == str(n)
    dots = view.locator("circle.series-combined title").all_text_contents()
    assert len(dots) == n and dots[0].startswith("First 1 sentence: p = ")
    first = next(p["sentences"] for p in trail if p["p_value"] < marked_detection.alpha)
    summary = view.locator(".trail-summary").inner_text()
    assert f"below the decision level {marked_detection.alpha} from sentence {first} on" in summary
    assert summary.endswith(
        f"with all {n}. Higher on the chart: a smaller p-value, stronger evidence."
    )
    # the charts fill their boxes (not narrower than the card), at any width
    for width in (900, 420):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # redrawn after a resize
        for box in page.locator(".chart-box").all():
            inner = box.evaluate("b => b.clientWidth")
            drawn = box.locator("svg").evaluate("s => s.getBoundingClientRect().width")
            assert inner * 0.97 <= drawn <= inner + 1, (width, inner, drawn)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    # a human text: the p-value never crosses, and the record never served it
    page.set_viewport_size({"width": 900, "height": 1000})
    _check(page, HUMAN)
    summary = page.inner_text("section.trail .trail-summary")
    assert summary.startswith(
        "The p-value of the first sentences, as more are read: it never falls below the "
        "decision level 0.01"
    )
    verdict = page.locator(".one-verdict")
    assert verdict.get_attribute("data-record") == "not_served"
    assert "The record: 0 of 5 sentences served verbatim" in verdict.inner_text()
    assert page.locator("details.requests").count() == 0
    # 5 sentences are not short: no line; 3 are, and the facts say why that is weak
    # evidence, with the semantic p's floor
    assert page.locator("dd.short-text").count() == 0
    _check(page, " ".join(split_sentences(HUMAN)[:3]))
    short = page.locator("dd.short-text").inner_text()
    assert short.startswith("3 sentences carry little evidence of meaning")
    assert "cannot go below 0.001" in short


@pytest.fixture(scope="module")
def layered(mpnet, mpnet_key) -> Any:
    """The layered mark under the test key (its detection loads the tokenizer only)."""
    from samark.schemes import create_scheme

    return create_scheme("samark-layered", key=mpnet_key, embedder=mpnet)


@pytest.fixture(scope="module")
def layered_server(layered, served_app) -> Iterator[str]:
    settings = ServeSettings(admin_tokens=frozenset({ADMIN}))
    with served_app(scheme_app(layered, settings, count_tokens=_words)) as base:
        yield base


def test_a_layered_mark_shows_each_layers_part_per_sentence_and_as_it_adds_up(
    page, layered, layered_server, marked
) -> None:
    """Each sentence's semantic p, its token layer (green among scored, scored here on
    its own) and the two joined as the scheme joins them; shading follows the joined
    p-value; the legends' colours are the bars' and the lines'."""
    from samark.schemes.samark.layered import combine_p_values

    detection = layered.detect(marked)
    page.goto(layered_server)
    _check(page, marked, token=ADMIN)
    layers = _facts(page)["Its two layers"]
    semantic, token = re.fullmatch(r"semantic p = (\S+) · token p = (\S+)", layers).groups()
    assert float(semantic) == pytest.approx(detection.details["p_semantic"], rel=0.06)
    assert float(token) == pytest.approx(detection.details["p_token"], rel=0.06)
    items = page.locator(".sentences li")
    assert items.count() == detection.n_units
    for i, sentence in enumerate(detection.sentences):
        own = layered.token_layer.score(layered.token_ids(sentence))
        meta = items.nth(i).locator(".meta").inner_text()
        assert f"{own.n_green} of {own.n_scored} green)" in meta
        joined = combine_p_values(detection.sentence_p_values[i], own.p_value)
        shaded = items.nth(i).get_attribute("data-evidence") == "mark"
        assert shaded == (joined < SHADE_P), (i, joined)
    # two bars a sentence; three lines as the sentences add up
    assert page.locator(".parts rect.bar.series-semantic").count() == detection.n_units
    assert page.locator(".parts rect.bar.series-token").count() == detection.n_units
    lines = page.locator("section.trail polyline").all()
    assert sorted(line.get_attribute("class") for line in lines) == [
        "line series-combined",
        "line series-semantic",
        "line series-token",
    ]
    # each legend's colour is its series' own
    for name in ("semantic", "token"):
        key = page.locator(f".parts .legend .key.series-{name}")
        bar = page.locator(f".parts rect.bar.series-{name}").first
        assert key.evaluate("k => getComputedStyle(k).backgroundColor") == bar.evaluate(
            "b => getComputedStyle(b).fill"
        )
    for name in ("combined", "semantic", "token"):
        key = page.locator(f".trail .legend .key.series-{name}")
        line = page.locator(f".trail polyline.series-{name}")
        assert key.evaluate("k => getComputedStyle(k).backgroundColor") == line.evaluate(
            "l => getComputedStyle(l).stroke"
        )


def test_the_local_page_keeps_its_token_across_reloads_and_nowhere_else(
    page, browser, servers
) -> None:
    """As `samark page` opens it: the token after '#' leaves the address at once, is kept
    in this tab's sessionStorage (nothing in localStorage, nothing in the address), so a
    reload still checks in full; another tab starts without it; a token that the server
    no longer takes (an earlier run's) is dropped, with words that say why."""
    base = servers["full"]
    page.goto(f"{base}/#token={ADMIN}")
    assert page.url == f"{base}/"
    page.reload()
    assert page.url == f"{base}/" and page.input_value("#token") == ADMIN
    assert "kept in this tab until you close it" in page.inner_text("#token-help")
    assert page.evaluate("sessionStorage.getItem('samark-page-token')") == ADMIN
    assert page.evaluate("localStorage.length") == 0
    _check(page, HUMAN)
    assert page.locator(".sentences li").count() == 5  # still the admin's whole answer
    other = browser.new_page()
    try:
        other.goto(base)
        assert other.input_value("#token") == ""
    finally:
        other.close()
    # an earlier run's token: refused, then forgotten
    page.goto(f"{base}/#token=an-earlier-runs-token")
    page.reload()
    assert page.input_value("#token") == "an-earlier-runs-token"
    _check(page, HUMAN)
    assert "no longer valid" in page.inner_text("#error")
    assert page.evaluate("sessionStorage.getItem('samark-page-token')") is None
    page.reload()
    assert page.input_value("#token") == ""


# ---- one verdict for every pair of the mark's and the record's findings (issue 65) ----

#: SAMARK_VERDICT_SCREENSHOTS=docs/results/2026-12-05-verdict saves each pair at desktop
#: and phone width there
VERDICT_SHOTS = os.environ.get("SAMARK_VERDICT_SCREENSHOTS")
#: the phone widths the page must fit without scrolling sideways
PHONE_WIDTHS = (360, 390, 414)


def _variant(real: dict[str, Any], mark: str, record: str) -> dict[str, Any]:
    """The server's real detailed answer on the served, marked text, turned into the answer
    of the pair (``mark``, ``record``): the mark found (as it is), weak (its first 3
    sentences, p 0.022, the semantic p 0.46), or not found (p 0.61); the record's
    sentences all served, one served / one paraphrase / the rest not served, none served,
    or no record; with the verdict :func:`samark.verdict.verdict` gives that pair."""
    from samark.verdict import MarkEvidence, RecordEvidence, verdict

    answer = json.loads(json.dumps(real))
    if mark == "weak":
        for name in ("sentences", "sentence_p_values", "marked_sentences", "evidence_trail"):
            answer[name] = answer[name][:3]
        answer["provenance"]["sentences"] = answer["provenance"]["sentences"][:3]
        answer.update(p_value=0.022, is_watermarked=False, n_units=3)
        for point, p in zip(answer["evidence_trail"], (0.3, 0.05, 0.022), strict=True):
            point["p_value"] = p
        answer["marked_sentences"] = []
    elif mark == "not_marked":
        answer.update(p_value=0.61, is_watermarked=False)
        answer["sentence_p_values"] = [0.5] * len(answer["sentences"])
        answer["marked_sentences"] = []
        for point in answer["evidence_trail"]:
            point["p_value"] = 0.61
    n = len(answer["sentences"])
    states = {
        "served": ["served"] * n,
        "paraphrase": ["served", "paraphrase"] + ["not_served"] * (n - 2),
        "not_served": ["not_served"] * n,
    }
    evidence = MarkEvidence(
        p_value=answer["p_value"],
        alpha=answer["alpha"],
        n_sentences=n,
        p_semantic=0.46 if mark == "weak" else None,
        p_token=0.0072 if mark == "weak" else None,
        semantic_floor=1 / 1000,  # the scan statistic's 999 null draws
    )
    if record == "no_record":
        del answer["provenance"]
        answer["verdict"] = verdict(evidence).to_dict()
        return answer
    prov = answer["provenance"]
    for entry, state in zip(prov["sentences"], states[record], strict=True):
        entry["state"] = state
        if state == "paraphrase":
            entry["cosine"] = 0.9671
        if state == "not_served":
            entry.pop("match", None)
    counts = {s: states[record].count(s) for s in ("served", "paraphrase", "not_served")}
    prov.update(counts, requests=[REQUEST] if counts["not_served"] < n else [])
    answer["verdict"] = verdict(evidence, RecordEvidence.of_report(prov)).to_dict()
    return answer


def _answering(body: str) -> Any:
    """A route handler that answers ``/v1/detect`` with ``body``."""

    def answer(route: Any) -> None:
        route.fulfill(status=200, content_type="application/json", body=body)

    return answer


def _labels_clear_of_lines_and_bars(page: Any) -> list[str]:
    """Each chart text that overlaps a level line or a bar (none should)."""
    return list(
        page.evaluate(
            """() => {
              const hits = [];
              for (const svg of document.querySelectorAll("svg.plot")) {
                const found = svg.querySelectorAll("line.alpha-line, line.shade-line, rect.bar");
                const marks = [...found].map((m) => m.getBoundingClientRect());
                for (const t of svg.querySelectorAll("text")) {
                  const a = t.getBoundingClientRect();
                  for (const b of marks) {
                    const h = Math.max(b.height, 1);
                    const across = a.left < b.right && b.left < a.right;
                    if (across && a.top < b.top + h && b.top < a.bottom) {
                      hits.push(t.textContent);
                    }
                  }
                }
              }
              return hits;
            }"""
        )
    )


def _fits(page: Any) -> None:
    """At each phone width: nothing scrolls sideways and no chart label is on a line or a
    bar."""
    for width in PHONE_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(300)  # the charts redraw after a resize
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= page.evaluate("window.innerWidth"), (width, scroll)
        assert not _labels_clear_of_lines_and_bars(page), width


@pytest.mark.slow
def test_one_verdict_for_every_pair_of_mark_and_record_fits_a_phone(page, servers, marked) -> None:
    """Each of the 12 pairs (mark found / weak / not found x served verbatim / paraphrase
    / not served / no record) reads as one headline, one conclusion and its reasons (the
    server's ``verdict``: the real answer on the served text, turned into each pair), with
    no contradicting badge beside it; the page fits 360-414 px in every state."""
    page.goto(servers["full"])
    captured: dict[str, Any] = {}

    def keep(route: Any) -> None:
        response = route.fetch()
        captured["answer"] = response.json()["data"][0]
        route.fulfill(response=response)

    page.route("**/v1/detect", keep)
    _check(page, marked, token=ADMIN)
    page.unroute("**/v1/detect")
    real = captured["answer"]
    assert real["verdict"]["code"] == "marked.served"
    _fits(page)
    for mark in ("marked", "weak", "not_marked"):
        for record in ("served", "paraphrase", "not_served", "no_record"):
            answer = _variant(real, mark, record)
            body = json.dumps({"object": "list", "data": [answer]})
            page.route("**/v1/detect", _answering(body))
            page.set_viewport_size({"width": 900, "height": 1000})
            _check(page)
            page.unroute("**/v1/detect")
            v = answer["verdict"]
            box = page.locator(".one-verdict")
            assert box.get_attribute("data-verdict") == f"{mark}.{record}"
            assert box.locator(".verdict").inner_text() == v["headline"]
            assert box.locator(".verdict-conclusion").inner_text() == v["conclusion"]
            assert box.locator(".verdict-reasons li").all_inner_texts() == v["reasons"]
            assert page.locator(".verdict").count() == 1  # one conclusion, no second badge
            if mark == "weak":
                assert "too weak at 3 sentences" in v["conclusion"] or record in (
                    "not_served",
                    "no_record",
                )
                assert any(r.startswith("A short text is weak evidence") for r in v["reasons"])
            _fits_and_shoot(page, f"{mark}.{record}")


def _fits_and_shoot(page: Any, stem: str) -> None:
    """The page fits a phone; with ``VERDICT_SHOTS`` set, its screenshots at desktop width
    (before the check) and at 390 px are saved there as ``STEM-desktop.png`` and
    ``STEM-390.png``."""
    if VERDICT_SHOTS:
        folder = Path(VERDICT_SHOTS)
        folder.mkdir(parents=True, exist_ok=True)
        _save_screenshot(page, folder / f"{stem}-desktop.png")
    _fits(page)
    if VERDICT_SHOTS:
        page.set_viewport_size({"width": 390, "height": 900})
        page.wait_for_timeout(300)
        _save_screenshot(page, Path(VERDICT_SHOTS) / f"{stem}-390.png", 390)


@pytest.fixture(scope="module")
def sealed(scheme, record, served_app, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A server that trusts the operator's C2PA root (a throwaway CA, as in test_c2pa),
    with the record that served the marked text; the operator's signer and a forger's,
    whose root the server does not trust."""
    pytest.importorskip("c2pa", reason="C2PA manifests need samark[c2pa]")
    pytest.importorskip("c2pa_text", reason="C2PA manifests need samark[c2pa]")
    from c2pa_pki import throwaway_pki
    from samark.provenance.c2pa_manifest import ManifestSigner, ManifestVerifier

    folder = tmp_path_factory.mktemp("page-pki")
    pki = {who: throwaway_pki(folder, who) for who in ("operator", "forger")}
    settings = ServeSettings(
        tokens=frozenset({USER}),
        admin_tokens=frozenset({ADMIN}),
        c2pa_verifier=ManifestVerifier.from_files([pki["operator"]["root"]]),
    )
    with served_app(scheme_app(scheme, settings, record=record, count_tokens=_words)) as base:
        yield {
            "base": base,
            **{who: ManifestSigner.from_files(p["chain"], p["key"]) for who, p in pki.items()},
        }


@pytest.mark.slow
def test_each_manifest_case_reads_as_one_verdict_with_its_signer(
    page, sealed, marked, mpnet_key
) -> None:
    """Issue 67's four cases, pasted as a person would, against a real server's C2PA
    check: the manifest intact and the mark found; stripped, but the mark and the record
    agree; present but one word edited; signed by a signer the server does not trust. The
    conclusion opens with the manifest's part, the facts name the state and the signer,
    and the page fits a phone in each case."""
    signed = sealed["operator"].sign(marked, model="samark", key_id=mpnet_key.key_id)
    word = next(w for w in marked.split()[len(marked.split()) // 2 :] if w.isalpha() and len(w) > 4)
    cases = {
        "intact": (signed, "Manifest intact and mark found.", "intact, signed by operator signer"),
        "stripped": (
            marked,
            "Manifest stripped or never attached, but the mark and record agree.",
            "none (never attached, or stripped)",
        ),
        "edited": (
            signed.replace(word, "banana", 1),
            "Manifest present, but the text was edited after signing.",
            "signed by operator signer (operator signer Org), but the text was edited",
        ),
        "untrusted": (
            sealed["forger"].sign(marked, model="samark", key_id=mpnet_key.key_id),
            "Manifest unverifiable: its signer is not trusted.",
            "signed by forger signer (forger signer Org), but unverifiable: the signer is not",
        ),
    }
    page.goto(sealed["base"])
    for name, (text, opening, fact) in cases.items():
        page.set_viewport_size({"width": 900, "height": 1000})
        _check(page, text, token=ADMIN)
        box = page.locator(".one-verdict")
        assert box.count() == 1 and box.get_attribute("data-mark") == "marked", name
        assert box.locator(".verdict-conclusion").inner_text().startswith(opening), name
        assert fact in _facts(page)["C2PA manifest"], name
        if name == "stripped":
            assert box.get_attribute("data-record") == "served"
        # the manifest is not scored: the sentences shown are the text's, no wrapper in them
        assert "\ufeff" not in page.inner_text(".report"), name
        _fits_and_shoot(page, f"manifest-{name}")
