"""Piggyback forgery: keep a marked text's mark, change what it says.

The attacker holds one marked text (bought from the operator's endpoint) and edits its
facts with the fewest possible changes to its tokens and sentence meanings as an embedder
sees them: it negates clauses (``not`` after an auxiliary or modal verb), changes numbers,
swaps two named entities wherever they occur, and inserts a few false sentences of its own.
If the detector still flags the result, the operator's mark vouches for claims its model
never made (Pang et al. 2024, "Attacking LLM watermarks by exploiting their strengths").

Every edit flips a fact by construction (a negated clause asserts the opposite; a changed
number or a swapped name states a different fact; an inserted sentence is a claim the model
never wrote), so the count of edits (:func:`piggyback`, ``PiggybackEdits``) is a measure of
meaning change that needs no NLI model: ``facts_changed`` is a lower bound on the number of
claims that differ. Embedding similarity, which the harness records for every attack, shows
how little of that an embedder sees.

A forgery attack (``kind = "forgery"``): a detection of its output is the attacker's
success. It needs only the marked text, never the key.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import partial

from samark.errors import SamarkError
from samark.evaluation.attacks.base import PerTextAttack, register_attack
from samark.segment import split_sentences

# an auxiliary or modal verb that takes "not" after it ("was" -> "was not")
_AUX = re.compile(
    r"\b(is|are|was|were|has|have|had|will|would|can|could|should|must|may|might|does|do|did)"
    r"\b(?! not\b|n't\b| never\b)",
)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w])")
_NUMBER_WORDS = [
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "hundred",
    "thousand",
    "million",
    "billion",
]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
# a capitalised word not at a sentence's start: a proper-noun proxy (no NER model needed)
_NAME = re.compile(r"(?<=[a-z,;:] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*)")
_FUNCTION_WORDS = frozenset(
    [
        "The",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "They",
        "Their",
        "Then",
        "When",
        "While",
        "After",
        "Before",
        "However",
        "But",
        "And",
        "Also",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "It",
        "Its",
        "He",
        "She",
        "His",
        "Her",
        "We",
        "Our",
        "You",
        "Your",
        "In",
        "On",
        "At",
        "For",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
)
#: The attacker's own false sentences, one template each: ``{name}`` is an entity of the text
#: (``"the company"`` where it has none), and the sentence's first letter is capitalised.
#: :func:`is_false_claim` tells an inserted one in a forged text.
FALSE_CLAIMS = (
    "{name} later admitted that the whole account had been invented.",
    "Officials confirmed that {name} had been paid to stay silent.",
    "{name} was arrested the following morning on fraud charges.",
    "Documents seen by reporters show that {name} knew about the plan for years.",
    "{name} has since withdrawn every statement quoted here.",
    "Investigators found that {name} had falsified the figures.",
    "A spokesperson said {name} would resign by the end of the week.",
    "The report was later shown to have been written by {name} itself.",
)
_CLAIM = re.compile(
    "|".join(re.escape(c).replace(re.escape("{name}"), ".+") for c in FALSE_CLAIMS),
    re.IGNORECASE,
)


def is_false_claim(sentence: str) -> bool:
    """Whether ``sentence`` is one of the sentences :func:`piggyback` inserts (a template of
    :data:`FALSE_CLAIMS`, any name in its place): how a study tells the attacker's own
    sentences in a forged text from the marked text's edited and untouched ones."""
    return _CLAIM.fullmatch(sentence.strip()) is not None


@dataclass(frozen=True)
class PiggybackEdits:
    """What one piggyback changed: each count is a fact the text now states differently."""

    negations: int
    numbers: int
    entity_swaps: int
    inserted: int
    sentences: int  # sentences of the forged text

    @property
    def facts_changed(self) -> int:
        return self.negations + self.numbers + self.entity_swaps + self.inserted

    @property
    def sentences_edited(self) -> float:
        """Share of the forged text's sentences that differ from the marked one's."""
        return 0.0 if not self.sentences else self._edited / self.sentences

    _edited: int = 0

    def to_dict(self) -> dict[str, float]:
        return {
            "negations": self.negations,
            "numbers": self.numbers,
            "entity_swaps": self.entity_swaps,
            "inserted": self.inserted,
            "facts_changed": self.facts_changed,
            "sentences_edited": round(self.sentences_edited, 4),
        }


def _other_number(match: re.Match[str], rng: random.Random) -> str:
    whole, frac = match.group(1), match.group(2)
    value = int(whole.replace(",", ""))
    new = value
    while new == value:
        new = max(0, value * rng.choice((2, 3, 10)) // rng.choice((1, 1, 4)) + rng.randint(-3, 7))
    text = f"{new:,}" if "," in whole else str(new)
    return text + (f".{frac}" if frac else "")


def _swapped(swap: dict[str, str], match: re.Match[str]) -> str:
    return swap[match.group(1)]


def piggyback(
    text: str,
    rng: random.Random,
    *,
    negations: int = 2,
    numbers: int = 2,
    entities: int = 1,
    insertions: int = 1,
) -> tuple[str, PiggybackEdits]:
    """``text`` with up to ``negations`` clauses negated, ``numbers`` numbers changed,
    ``entities`` pairs of names swapped (every occurrence) and ``insertions`` false
    sentences inserted at random places; returns the forged text and what it changed.
    Fewer edits are made where the text offers fewer places (the counts say how many)."""
    sentences = split_sentences(text)
    if not sentences:
        return text, PiggybackEdits(0, 0, 0, 0, 0)
    edited: set[int] = set()

    # negate: one auxiliary per chosen sentence
    negatable = [i for i, s in enumerate(sentences) if _AUX.search(s)]
    n_neg = 0
    for i in rng.sample(negatable, min(negations, len(negatable))):
        hits = list(_AUX.finditer(sentences[i]))
        m = hits[rng.randrange(len(hits))]
        sentences[i] = sentences[i][: m.end()] + " not" + sentences[i][m.end() :]
        edited.add(i)
        n_neg += 1

    # numbers: digits, then number words (each sentence edited from its end, so that the
    # spans still to edit stay where they were)
    spots = [(i, m) for i, s in enumerate(sentences) for m in _NUMBER.finditer(s)]
    chosen = rng.sample(spots, min(numbers, len(spots)))
    for i, m in sorted(chosen, key=lambda c: (c[0], -c[1].start())):
        s = sentences[i]
        sentences[i] = s[: m.start()] + _other_number(m, rng) + s[m.end() :]
        edited.add(i)
    n_num = len(chosen)
    words = [(i, m) for i, s in enumerate(sentences) for m in _NUMBER_WORD.finditer(s)]
    chosen = rng.sample(words, min(numbers - n_num, len(words)))
    for i, m in sorted(chosen, key=lambda c: (c[0], -c[1].start())):
        old = m.group(1)
        new = rng.choice([w for w in _NUMBER_WORDS if w != old.lower()])
        new = new.capitalize() if old[0].isupper() else new
        sentences[i] = sentences[i][: m.start()] + new + sentences[i][m.end() :]
        edited.add(i)
    n_num += len(chosen)

    # entities: swap two names everywhere (one pair per swap)
    found: dict[str, int] = {}
    for s in sentences:
        for m in _NAME.finditer(s):
            if m.group(1).split()[0] not in _FUNCTION_WORDS:
                found[m.group(1)] = found.get(m.group(1), 0) + 1
    names = sorted(found, key=lambda n: (-found[n], n))
    n_swap = 0
    while n_swap < entities and len(names) >= 2:
        a, b = names.pop(0), names.pop(rng.randrange(len(names)))
        pattern = re.compile(rf"\b({re.escape(a)}|{re.escape(b)})\b")
        swap = {a: b, b: a}
        for i, s in enumerate(sentences):
            new = pattern.sub(partial(_swapped, swap), s)
            if new != s:
                sentences[i] = new
                edited.add(i)
        n_swap += 1

    # insert the attacker's own false sentences
    subjects = [n for n in found if n.split()[0] not in _FUNCTION_WORDS] or ["the company"]
    out = list(sentences)
    inserted = 0
    for claim in rng.sample(FALSE_CLAIMS, min(insertions, len(FALSE_CLAIMS))):
        name = rng.choice(subjects)
        line = claim.format(name=name)
        out.insert(rng.randint(1, len(out)), line[0].upper() + line[1:])
        inserted += 1
    edits = PiggybackEdits(n_neg, n_num, n_swap, inserted, len(out), _edited=len(edited) + inserted)
    return " ".join(out), edits


@register_attack("piggyback")
class Piggyback(PerTextAttack):
    """Negate ``negations`` clauses, change ``numbers`` numbers, swap ``entities`` pairs of
    names and insert ``insertions`` false sentences into a marked text (a forgery: a
    detection of the result is the attacker's success)."""

    name = "piggyback"
    summary = "forgery: change a marked text's facts (negations, numbers, names, false sentences)"
    kind = "forgery"

    def __init__(
        self, negations: int = 2, numbers: int = 2, entities: int = 1, insertions: int = 1
    ) -> None:
        counts = {
            "negations": negations,
            "numbers": numbers,
            "entities": entities,
            "insertions": insertions,
        }
        for field, value in counts.items():
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 50:
                raise SamarkError(f"{field} must be an integer in [0, 50], got {value!r}")
        self.counts = counts

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        return self.edits(text, rng)[0]

    def edits(self, text: str, rng: random.Random) -> tuple[str, PiggybackEdits]:
        """The forged text and what it changed (the harness's meaning-change measure)."""
        return piggyback(text, rng, **self.counts)
