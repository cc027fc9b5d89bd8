"""A plagiarist's transformer for Python source: rename identifiers, then reformat.

Used by tests/test_content.py and bench/content_code.py. The renaming is
consistent (Baker's parameterized match): every name that the module binds
(functions, classes, parameters, assigned variables, and attributes and
keywords that use those names) gets a new name; imported names, builtins
and dunder names stay. The layout then comes from :func:`ast.unparse`
(comments dropped, quotes, spacing and parentheses redone), reindented
to two spaces, with two blank lines in three dropped.
"""

from __future__ import annotations

import ast
import builtins
import hashlib


def _new_name(name: str, salt: str) -> str:
    digest = hashlib.blake2b(f"{salt}:{name}".encode(), digest_size=4).hexdigest()
    return f"{'v' if name[:1].islower() else 'K'}{digest}"


def _bound_names(tree: ast.AST) -> set[str]:
    bound: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            imported.add((node.asname or node.name).split(".")[0])
    keep = imported | set(dir(builtins)) | {"self", "cls"}
    return {n for n in bound - keep if not (n.startswith("__") and n.endswith("__"))}


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.mapping.get(node.arg, node.arg)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.mapping.get(node.name, node.name)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.attr = self.mapping.get(node.attr, node.attr)
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg is not None:
            node.arg = self.mapping.get(node.arg, node.arg)
        return self.generic_visit(node)


def morph(source: str, salt: str = "sif") -> str:
    """``source`` with its bound names consistently renamed and a new layout.

    Raises ``SyntaxError`` if ``source`` is not Python this interpreter parses.
    """
    tree = ast.parse(source)
    mapping = {name: _new_name(name, salt) for name in sorted(_bound_names(tree))}
    tree = _Renamer(mapping).visit(tree)
    text = ast.unparse(tree)
    lines = []
    for i, line in enumerate(text.splitlines()):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() and i % 3:
            continue
        lines.append(" " * (indent // 2) + line.lstrip(" "))
    return "\n".join(lines) + "\n"
