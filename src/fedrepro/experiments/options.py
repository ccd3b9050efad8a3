"""The options each registered algorithm, tuning and adaptation method accepts, read from
the library's source without importing it (the plan is built in every Snakemake parse,
which never imports torch).

The names come from the code that takes them, so a new option needs no second list:

- an algorithm (``fedrepro.algorithms.ALGORITHMS``): its constructor's keywords, and those
  of its base classes where it forwards ``**kw`` to ``super().__init__`` (less what it
  passes there itself); a constructor that keeps ``**kw`` refuses the rest;
- a tuning (``fedrepro.models.tuning.TUNINGS``): its ``options``;
- an adaptation method (``fedrepro.tta.ADAPT_METHODS``): its ``options``.

tests/experiments/test_options.py holds each table equal to the imported registry's.
"""

from __future__ import annotations

import ast
from functools import cache
from importlib.resources import files
from pathlib import Path

PACKAGE = "fedrepro"


@cache
def _tree(module: str) -> ast.Module:
    """The parsed source of ``module`` (a package's ``__init__.py``), found as package data;
    or of the file ``module`` names where it ends in ``.py`` (a method from outside)."""
    if module.endswith(".py"):
        return ast.parse(Path(module).read_text(), filename=module)
    *parents, leaf = module.split(".")[1:]
    base = files(PACKAGE).joinpath(*parents)
    source = base / leaf / "__init__.py"
    if not source.is_file():
        source = base / f"{leaf}.py"
    return ast.parse(source.read_text())


def _definition(module: str, name: str) -> tuple[str, ast.AST]:
    """Where ``name`` of ``module`` is defined (following ``from … import``): the module and
    its class, or the value assigned to it."""
    for node in _tree(module).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return module, node.value
    for node in _tree(module).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _definition(node.module, alias.name)
    raise LookupError(f"{module}: no definition of {name!r}")


def _registered(module: str, registry: str) -> list[tuple[str, ast.AST]]:
    """The definitions a registry ``{x.name: x for x in (A, B, …)}`` is built from."""
    _, value = _definition(module, registry)
    if not isinstance(value, ast.DictComp) or not isinstance(value.generators[0].iter, ast.Tuple):
        raise LookupError(f"{module}.{registry}: not {{x.name: x for x in (…)}}")
    return [_definition(module, elt.id) for elt in value.generators[0].iter.elts]


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _keys(module: str, node: ast.expr | None) -> list[str]:
    """The keys of a dict or set written with literals, ``**`` of module-level names,
    ``dict(…)``, ``frozenset(…)`` and ``|``."""
    if node is None:
        return []
    if isinstance(node, ast.Dict):
        return [
            key
            for k, v in zip(node.keys, node.values, strict=True)
            for key in (_keys(module, v) if k is None else [ast.literal_eval(k)])
        ]
    if isinstance(node, ast.Set):
        return [ast.literal_eval(e) for e in node.elts]
    if isinstance(node, ast.Name):
        return _keys(*_definition(module, node.id))
    call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    if call and node.func.id in ("dict", "frozenset", "set") and len(node.args) <= 1:
        return [*_keys(module, node.args[0] if node.args else None),
                *(k.arg for k in node.keywords if k.arg)]  # fmt: skip
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_keys(module, node.left), *_keys(module, node.right)]
    raise LookupError(f"{module}: cannot read the names of {ast.unparse(node)!r}")


def _class_attribute(module: str, cls: ast.ClassDef, attribute: str) -> str:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == attribute for t in node.targets
        ):
            return ast.literal_eval(node.value)
    if not cls.bases:
        raise LookupError(f"{module}.{cls.name}: no {attribute!r}")
    return _class_attribute(*_definition(module, cls.bases[0].id), attribute)


def _constructor_keywords(module: str, cls: ast.ClassDef) -> set[str]:
    """The keywords a class's constructor accepts, through the ``**kw`` it forwards."""
    base = _definition(module, cls.bases[0].id) if cls.bases else None
    inherited = _constructor_keywords(*base) if base else set()
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None:
        return inherited
    own = {a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)}
    rest = init.args.kwarg.arg if init.args.kwarg else None
    for call in ast.walk(init):
        is_super = (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "__init__"
            and isinstance(call.func.value, ast.Call)
            and getattr(call.func.value.func, "id", None) == "super"
        )
        forwards = is_super and any(
            k.arg is None and getattr(k.value, "id", None) == rest for k in call.keywords
        )
        if forwards:
            return own | (inherited - {k.arg for k in call.keywords if k.arg})
    return own


@cache
def algorithm_options() -> dict[str, frozenset[str]]:
    """``algorithm.name`` -> the other keys its ``algorithm`` block may hold."""
    return {
        _class_attribute(module, cls, "name"): frozenset(_constructor_keywords(module, cls))
        for module, cls in _registered("fedrepro.algorithms", "ALGORITHMS")
    }


@cache
def tuning_options() -> dict[str, frozenset[str]]:
    """``model.tuning`` -> the keys its ``model.tuning_options`` may hold."""
    module = "fedrepro.models.tuning"
    _, table = _definition(module, "TUNINGS")
    return {
        ast.literal_eval(k): frozenset(_keys(module, _argument(v, 1, "options")))
        for k, v in zip(table.keys, table.values, strict=True)
    }


@cache
def server_model_names() -> frozenset[str]:
    """What a structural row's ``server_model.name`` may be (``models.server_models``)."""
    return frozenset(_keys(*_definition("fedrepro.models.server_models", "SERVER_MODELS")))


@cache
def adapt_options() -> dict[str, frozenset[str]]:
    """``adapt.method`` -> the other keys its ``adapt`` block may hold."""
    return {
        ast.literal_eval(_argument(call, 0, "name")): frozenset(
            _keys(module, _argument(call, 2, "options"))
        )
        for module, call in _registered("fedrepro.tta", "ADAPT_METHODS")
    }


def file_algorithms(path: str) -> dict[str, frozenset[str]]:
    """The algorithms a Python file outside the library defines (a method from outside:
    config ``methods``): each class with a ``name`` (its own or a base's) and its
    constructor's keywords, read as the registry's are. Not cached: the file may change."""
    _tree.cache_clear()  # the file's text of this call, not of an earlier one
    found = {}
    for node in _tree(path).body:
        if isinstance(node, ast.ClassDef) and node.bases:
            try:
                name = _class_attribute(path, node, "name")
                found[name] = frozenset(_constructor_keywords(path, node))
            except (LookupError, AttributeError, ValueError):
                continue  # not an algorithm (no name, or a base that is none of ours)
    return found
