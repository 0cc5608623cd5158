"""gpuledger uses other libraries as their authors mean them: no `_`-prefixed attribute of another package
(CPython's multiprocessing, botocore, Prefect, scrapy, playwright...) and no private environment variable.

A `_name` attribute is ours when some gpuledger module defines it (a function, a class, an assignment, a
parameter); any other `x._name` reaches into a library's internals, which an upgrade may change without notice.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
PRODUCTION = [p for d in ("adapters", "flows", "spiders", "warehouse", "gpuledger") for p in (ROOT / d).rglob("*.py")
              if "recordings" not in p.parts]
PRIVATE = re.compile(r"^_[A-Za-z0-9][A-Za-z0-9_]*$")  # not dunders
FORBIDDEN_TEXT = re.compile(r"PREFECT__[A-Z_]+|multiprocessing\.forkserver|_forkserver_alive_fd|_response_parser_factory")


def _defined(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_no_private_attribute_of_another_package_and_no_private_variable() -> None:
    trees = {p: ast.parse(p.read_text(), str(p)) for p in PRODUCTION}
    ours = set().union(*(_defined(t) for t in trees.values()))
    foreign = sorted(
        f"{p.relative_to(ROOT)}:{node.lineno}: .{node.attr}"
        for p, tree in trees.items() for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and PRIVATE.match(node.attr) and node.attr not in ours)
    assert not foreign, "private internals of other packages:\n" + "\n".join(foreign)
    texts = sorted(f"{p.relative_to(ROOT)}: {m.group(0)}" for p in PRODUCTION
                   for m in FORBIDDEN_TEXT.finditer(p.read_text()))
    assert not texts, "private names of other packages:\n" + "\n".join(texts)


def test_the_check_sees_a_private_attribute() -> None:
    """The rule itself, on a line that reaches into a library (so the test above can fail)."""
    tree = ast.parse("import botocore\nfactory = client._endpoint._response_parser_factory\n")
    found = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and PRIVATE.match(n.attr)
             and n.attr not in _defined(tree)]
    assert sorted(found) == ["_endpoint", "_response_parser_factory"]
    assert FORBIDDEN_TEXT.search("os.environ['PREFECT__SERVER_EPHEMERAL'] = '1'")
