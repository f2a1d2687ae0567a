"""The package's layout: no module that only re-exports another's names."""

from __future__ import annotations

import ast
from pathlib import Path

import samark

SRC = Path(samark.__file__).parent


def _only_imports(path: Path) -> bool:
    """A module whose statements, after its docstring, are imports (and ``__all__``)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    rest = [
        node
        for node in body
        if not (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
        )
    ]
    return bool(rest) and all(isinstance(n, ast.Import | ast.ImportFrom) for n in rest)


def test_no_module_is_a_re_export_shim() -> None:
    """A module moved is moved: its old name is not kept as a module of imports (a
    package's ``__init__`` may gather its own names)."""
    shims = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "__init__.py" and _only_imports(path)
    ]
    assert not shims, shims


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


#: modules that moved, by their old names: none may come back as a module or a shim
MOVED = {
    "pivots.py": "keys/pivots.py",
    "pivot_space.py": "keys/pivot_spaces.py",
    "centring.py": "schemes/samark/topic_centring.py",
    "keys/ring.py": "keys/keyring.py",
    "detection/ring.py": "detection/ring_detector.py",
    "detection/records.py": "detection/record_files.py",
    "schemes/samark/ring.py": "schemes/samark/ring_scoring.py",
}


def test_moved_modules_live_only_at_their_new_names() -> None:
    """SAMark's own modules sit in its package, and the three ``ring.py`` and two
    ``records.py`` say what they hold (issue 46): the old names are gone and nothing in src
    imports them."""
    assert not [old for old in MOVED if (SRC / old).exists()]
    assert all((SRC / new).is_file() for new in MOVED.values())
    old_names = tuple(f"samark.{old.removesuffix('.py').replace('/', '.')}" for old in MOVED)
    stale = [
        f"{path.relative_to(SRC)}: {name}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for name in _imported(node)
        if name in old_names
    ]
    assert not stale, stale
