"""``samark centring build``: a centring reference from the operator's own human text, so
that each key holds its false-positive rate on her domain (samark.schemes.samark.topic_centring)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from samark.cli.app import centring_app
from samark.cli.common import KeyOption, err, fail, load_key
from samark.cli.loading import human_heads
from samark.errors import SamarkError


@centring_app.command("build")
def build(
    source: Annotated[
        str,
        typer.Argument(
            help="Human text of your domain: a .jsonl / .parquet file with a text field "
            "(--field) or a data set name. Not the texts you will check the key on."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The reference file to write.")],
    key: KeyOption = Path("samark.key"),
    field: Annotated[str, typer.Option(help="Text field of JSONL / Parquet records.")] = "text",
    sentences: Annotated[
        int, typer.Option(help="Each text's first N sentences, as detection scores them.")
    ] = 10,
    limit: Annotated[int, typer.Option(help="At most this many texts.")] = 2000,
    skip: Annotated[
        int, typer.Option(help="Leave out the first N texts (keep them to check the key on).")
    ] = 0,
    neighbours: Annotated[
        int, typer.Option(help="Reference texts averaged per detected text.")
    ] = 32,
    force: Annotated[bool, typer.Option(help="Overwrite --out.")] = False,
) -> None:
    """Build a centring reference for KEY's embedder from human text of your domain.

    Detect and check keys with `--centring FILE`: each text is centred by the mean of its
    nearest reference texts before the key's pivots see it, which removes the lean a key
    has towards your domain's topics; p-values stay exact. Use a few hundred texts or
    more, and check the key (`samark check-key --centring FILE`) on texts the reference
    does not hold. The file holds means of embeddings of your text, no key."""
    from samark.schemes.samark.topic_centring import NeighbourCentring

    if sentences < 1 or limit < 1 or skip < 0 or neighbours < 1:
        raise fail("--sentences, --limit and --neighbours must be >= 1, --skip >= 0")
    if out.exists() and not force:
        raise fail(f"{out} exists; pass --force to overwrite it")
    identity = load_key(key).embedder  # the embedder only: nothing secret is read out
    texts = human_heads(source, field, sentences, limit + skip)[skip:]
    if len(texts) <= neighbours:
        raise fail(
            f"a reference needs more than --neighbours ({neighbours}) texts; "
            f"{source} gives {len(texts)} after --skip {skip}"
        )
    from samark.embed import load_embedder
    from samark.segment import split_sentences

    try:
        embedder = load_embedder(identity.name)
        if not embedder.identity.matches(identity):
            raise SamarkError(
                f"the installed {identity.name} is not the embedder the key was made with"
            )
        embedder.progress_over = 2000
        ref = NeighbourCentring.from_texts(
            embedder,
            [split_sentences(t) for t in texts],
            k=neighbours,
            name=Path(source).stem,
        )
        ref.save(out, overwrite=force)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    err.print(
        f"wrote {out}: {len(texts)} human texts of {source}, {neighbours} neighbours a text, "
        f"embedder {identity.name}"
    )
