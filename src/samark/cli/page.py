"""``samark page``: the detection page for one person, on this machine, without a server
to run: detection with a key file (no generator is loaded), on 127.0.0.1 only."""

from __future__ import annotations

import html
import secrets
import shutil
import socket
import tempfile
import threading
import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from samark.cli.app import app
from samark.cli.common import KeyOption, err, fail, refuse_scheme_options
from samark.cli.loading import (
    AnySchemeOption,
    CentringOption,
    SchemeOption,
    can,
    centring_fields,
    load_other_scheme,
    load_scheme,
    resolve_scheme,
)
from samark.cli.manifest_options import C2paTrustOption, manifest_verifier
from samark.cli.record import RecordOption, check_record_url, open_record

if TYPE_CHECKING:
    import uvicorn


@app.command()
def page(
    key: KeyOption = Path("samark.key"),
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    centring: CentringOption = None,
    alpha: Annotated[float, typer.Option(help="Significance level of the decision.")] = 0.01,
    record_url: RecordOption = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 8765,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the page's address; open no browser.")
    ] = False,
    c2pa_trust: C2paTrustOption = None,
) -> None:
    """Open the detection page in your browser to check texts against KEY.

    Paste or upload a text, see whether KEY marked it, which sentences carry the mark
    (with --record: which were served), and download the report. With --c2pa-trust, a
    C2PA manifest's state too (docs/compliance.md).

    It listens on 127.0.0.1 only, with a token made for this run in the address it opens (in the
    part after '#', which a browser never sends anywhere). Ctrl-C stops it."""
    scheme_name = resolve_scheme(scheme_name, key, None, any_scheme=any_scheme)
    if not 0 < alpha < 1:
        raise fail(f"--alpha must be between 0 and 1, got {alpha}")
    refuse_scheme_options(scheme_name, centring=centring)
    check_record_url(record_url)
    try:
        import uvicorn

        from samark.serving import ServeSettings
        from samark.serving.app import scheme_app
    except ImportError as exc:
        raise fail(
            f"`samark page` needs the server extra ({exc}): pip install 'samark[server]'"
        ) from None
    listener = _listener(port)
    if can(scheme_name, "pivot_detector"):
        detector = load_scheme(key, scheme_name, alpha=alpha, **centring_fields(centring))
    else:
        detector = load_other_scheme(scheme_name, key, alpha=alpha)
    record = None if record_url is None else open_record(record_url, key, detector.embedder)
    token = secrets.token_urlsafe(24)
    # the one caller is an admin: the whole answer, sentence evidence (and provenance) included
    verifier = manifest_verifier(c2pa_trust)
    settings = ServeSettings(admin_tokens=frozenset({token}), c2pa_verifier=verifier)
    # words count the usage of a generation it never runs: asking the scheme would load
    # its generator
    application = scheme_app(
        detector,
        settings,
        record=record,
        count_tokens=lambda text: len(text.split()),
        warm_engine=False,  # it only detects: the generator is never loaded
    )
    address = f"http://127.0.0.1:{listener.getsockname()[1]}/#token={token}"
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning"))
    # the browser is given a file that leads to the address (see _open_browser)
    opener = None if no_browser else Path(tempfile.mkdtemp(prefix="samark-page-"))
    threading.Thread(target=_announce, args=(server, address, opener), daemon=True).start()
    try:
        server.run(sockets=[listener])
    finally:
        if record is not None:
            record.close()
        if opener is not None:
            shutil.rmtree(opener, ignore_errors=True)


def _listener(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:``port``, or a clear error when the port is taken."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # as uvicorn's own: a restart takes the port while the last run's closed connections
    # wait out TIME_WAIT (a port another program listens on is still refused)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
    except OSError as exc:
        listener.close()
        raise fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): choose --port") from None
    return listener


def _announce(server: uvicorn.Server, address: str, opener: Path | None) -> None:
    """Once the server answers: say where the page is, and open it (through a file in
    the folder ``opener``; None: no browser)."""
    while not server.started:
        time.sleep(0.05)
    err.print(f"detection page: {address}  (Ctrl-C stops it)", highlight=False, soft_wrap=True)
    if opener is not None and not _open_browser(address, opener):
        err.print("[yellow]note:[/] no browser found: open the address above")


def _open_browser(address: str, folder: Path) -> bool:
    """Open ``address`` in the browser through a file in ``folder`` (this user's alone)
    that leads there: the browser's command line, which every user of the machine can
    read (``ps``), then holds no token, only the file's name (as Jupyter does)."""
    folder.chmod(0o700)
    page = folder / "open.html"
    target = html.escape(address, quote=True)
    page.touch(mode=0o600)
    page.write_text(
        f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
        f'<title>samark page</title><a href="{target}">Open the detection page</a>\n'
    )
    return webbrowser.open(page.as_uri())
