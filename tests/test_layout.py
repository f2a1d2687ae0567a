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
