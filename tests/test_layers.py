"""The house's floors (docs/architecture.md, "Floors, from the ground up"), checked on
every import in ``src/samark``: a room uses only its own modules and rooms on lower
floors. Every import counts, those inside a function or under ``TYPE_CHECKING`` too (a
lazy import is still an arrow). Run by CI with the suite (``.ci/run``)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "samark"

#: docs/architecture.md's floors: room (a module or package of ``samark``) -> floor
FLOORS: dict[str, int] = {
    **dict.fromkeys(
        ["errors", "text", "segment", "detection_result", "token_layer", "json_types"], 1
    ),
    **dict.fromkeys(["keys", "models", "registry", "openai_client", "intake", "verdict"], 2),
    **dict.fromkeys(["embed", "datasets", "sampling", "provenance"], 3),
    "schemes": 4,
    **dict.fromkeys(["detection", "testing"], 5),
    **dict.fromkeys(["serving", "evaluation"], 6),
    # the command line, and the adapters for other toolkits (MarkLLM)
    **dict.fromkeys(["cli", "integrations"], 7),
    # the package's front door and ``python -m samark``: above every room
    **dict.fromkeys(["__init__", "__main__"], 8),
}


def _room(module: str) -> str:
    """The room of a dotted ``samark.`` module name (``samark.schemes.base``: schemes)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1] if len(parts) > 2 else [*parts[:-1], "__init__"]
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported samark module) for every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("samark.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name == "samark":  # `from samark import x`: x is a room
                out += [(node.lineno, f"samark.{a.name}") for a in node.names]
            elif name.startswith("samark."):
                out.append((node.lineno, name))
    return out


def test_every_room_has_a_floor() -> None:
    rooms = {p.stem if p.is_file() else p.name for p in SRC.iterdir()}
    rooms = {r for r in rooms if not r.startswith((".", "_")) or r in ("__init__", "__main__")}
    rooms -= {"py", "resources"}  # py.typed, package data
    assert rooms <= set(FLOORS), f"rooms without a floor: {sorted(rooms - set(FLOORS))}"


def _arrows_up(path: Path, module: str) -> list[str]:
    """Each import of ``path`` (module ``module``) that does not point down."""
    own = _room(module) if module != "samark.__init__" else "__init__"
    up = []
    for line, target in _imports(path, module):
        room = _room(target)
        if room != own and room in FLOORS and FLOORS[room] >= FLOORS[own]:
            up.append(
                f"{path.name}:{line}: {own} (floor {FLOORS[own]}) imports {target} "
                f"(floor {FLOORS[room]})"
            )
    return up


def test_every_import_points_down() -> None:
    up = [a for p in sorted(SRC.rglob("*.py")) for a in _arrows_up(p, _module_name(p))]
    assert not up, "imports that do not point down:\n" + "\n".join(up)


def test_the_check_sees_an_arrow_up(tmp_path) -> None:
    """An import up, inside a function or relative, and one sideways on a floor are found;
    one down and one within the room are not."""
    path = tmp_path / "fake.py"
    path.write_text(
        "from samark.errors import SamarkError\n"
        "from .base import Watermark\n"
        "def f():\n"
        "    from samark.cli.common import fail\n"
        "    from ..detection import ring_detector\n"
        "    from samark import embed, testing\n"
    )
    up = _arrows_up(path, "samark.schemes.fake")
    assert [a.split(" imports ")[1].split()[0] for a in up] == [
        "samark.cli.common",
        "samark.detection",
        "samark.testing",
    ]
    rooms = [FLOORS[_room(_module_name(p))] for p in (SRC / "cli" / "app.py", SRC / "text.py")]
    assert rooms == [7, 1]


#: the most lines a file in ``src/samark`` may have (docs/architecture.md, "Thin commands"):
#: a file that grows past it holds more than one idea
MOST_LINES = 500
#: the most lines in ``src/samark`` that say ``Any`` outside an import (issue 64: the core
#: interfaces, ``Watermark``, ``from_params``, ``Detection`` and the engines, say none)
MOST_ANY = 120


def test_no_file_in_src_is_over_500_lines() -> None:
    files = [
        p for p in SRC.rglob("*") if p.is_file() and p.suffix in {".py", ".js", ".css", ".html"}
    ]
    long = {
        str(p.relative_to(SRC)): n
        for p in files
        if (n := len(p.read_text().splitlines())) > MOST_LINES
    }
    assert not long, f"files over {MOST_LINES} lines: {long}"


def _any_lines(path: Path) -> list[int]:
    """The lines of ``path`` whose code (not an import, not a comment or string) names
    ``typing.Any``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if (isinstance(node, ast.Name) and node.id == "Any")
            or (isinstance(node, ast.Attribute) and node.attr == "Any")
            or (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _says_any(node.value)
            )
        }
    )


def _says_any(annotation: str) -> bool:
    """A string annotation (``"dict[str, Any]"``) that names Any."""
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(tree))


def test_any_is_rare_and_absent_from_the_core_interfaces() -> None:
    counts = {str(p.relative_to(SRC)): len(_any_lines(p)) for p in sorted(SRC.rglob("*.py"))}
    total = sum(counts.values())
    worst = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
    assert total <= MOST_ANY, f"{total} lines say Any (at most {MOST_ANY}); most in {worst}"
    core = ["detection_result.py", "sampling/base.py", "schemes/base.py"]
    assert {f: counts[f] for f in core} == dict.fromkeys(core, 0)
