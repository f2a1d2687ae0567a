"""What a text must be to be checked, said once for every door (issue 65): ``samark
detect``, the server's ``/v1/detect`` and its page take the same limits and refuse in
the same words; :func:`admit` reads a text once: refused, or its sentences.

- **Binary**: a text holding NUL or another control character (not a tab, line break,
  carriage return, form feed or vertical tab) is binary, not text; bytes that are not
  UTF-8 are not text either.
- **Size**: a text of more than :data:`MAX_TEXT_CHARS` characters or
  :data:`MAX_TEXT_SENTENCES` sentences is more than one check takes (a server's
  ``ServeSettings`` may set other limits; these are its defaults). The CLI checks such a
  text only when asked (``samark detect --long``), with a progress bar.
"""

from __future__ import annotations

from dataclasses import dataclass

from samark.errors import SamarkError
from samark.segment import split_sentences

#: characters of one text (about 1,000 sentences)
MAX_TEXT_CHARS = 100_000
#: sentences of one text: what one check may ask of the detector
MAX_TEXT_SENTENCES = 200
#: control characters a text may hold: whitespace
_ALLOWED_CONTROLS = frozenset("\t\n\r\x0b\x0c")


class TextRefused(SamarkError):
    """A text refused at intake: ``code`` names why (``binary``, ``not_utf8``,
    ``text_too_long``), the message says it."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Limits:
    """What one check takes: characters and sentences of a text."""

    max_chars: int = MAX_TEXT_CHARS
    max_sentences: int = MAX_TEXT_SENTENCES


#: the limits of one check: the server's defaults
SERVER_LIMITS = Limits()


def control_character(text: str) -> str | None:
    """The first control character of ``text`` that no text holds, or None."""
    for ch in text:
        if (ch < " " and ch not in _ALLOWED_CONTROLS) or ch == "\x7f":
            return ch
    return None


def check_binary(text: str, origin: str = "the text") -> None:
    """Refuse a ``text`` holding a control character: it is binary, not text."""
    found = control_character(text)
    if found is not None:
        raise TextRefused(
            f"{origin} is binary, not text (it holds the control character U+{ord(found):04X})",
            "binary",
        )


def decode(data: bytes, origin: str) -> str:
    """``data`` as UTF-8 text, refused where it is binary or not UTF-8."""
    if b"\0" in data:  # binary however it decodes
        check_binary("\0", origin)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TextRefused(f"{origin} is not UTF-8 text", "not_utf8") from None
    check_binary(text, origin)
    return text


def check_chars(text: str, limits: Limits = Limits()) -> None:
    """Refuse a text of more characters than one check takes."""
    if len(text) > limits.max_chars:
        raise TextRefused(
            f"a text of {len(text)} characters; at most {limits.max_chars}", "text_too_long"
        )


def check_sentences(count: int, limits: Limits = Limits()) -> None:
    """Refuse a text of ``count`` sentences, more than one check takes."""
    if count > limits.max_sentences:
        raise TextRefused(
            f"a text of {count} sentences; at most {limits.max_sentences}", "text_too_long"
        )


def admit(text: str, limits: Limits | None = SERVER_LIMITS, origin: str = "the text") -> list[str]:
    """``text``'s sentences, or :class:`TextRefused` where it is binary or (with
    ``limits``) more than one check takes. Characters are counted before the text is
    split, so that a megabyte is refused without splitting it."""
    check_binary(text, origin)
    if limits is not None:
        check_chars(text, limits)
    sentences = split_sentences(text)
    if limits is not None:
        check_sentences(len(sentences), limits)
    return sentences
