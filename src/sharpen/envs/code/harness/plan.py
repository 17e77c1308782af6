"""Planning ``check(candidate)`` into statements: which are test cases and which are setup.

A top-level statement of ``check`` that contains an ``assert`` and (directly, or through names
set from it) uses ``candidate`` is one test case; any other statement is setup. Each step is
``(kind, code, source, node, uses)``: ``kind`` ``"test"`` or ``"setup"``, its compiled code,
its source (dedented, clipped), its AST node, and whether it uses the candidate.
"""

from __future__ import annotations

import ast


def clip(text, limit):
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] if limit <= 3 else text[: limit - 3] + "..."


def plan(check_def, test_src, param, entry_point):
    """The steps of ``check_def``'s body, or ``None`` when its statements cannot run one by one
    (one fails to compile alone) or none of them is a test case."""
    lines = test_src.replace("\r\n", "\n").split("\n")
    tainted = {param, entry_point}
    steps = []
    body = check_def.body
    if body and isinstance(body[0], ast.Expr) and isinstance(
            getattr(body[0], "value", None), ast.Constant) and isinstance(
            body[0].value.value, str):
        body = body[1:]
    for stmt in body:
        names, stored, defined, has_assert = _scan(stmt)
        uses = bool(names & tainted)
        if uses:
            tainted |= stored | defined
        try:
            code = compile(ast.Module(body=[stmt], type_ignores=[]), "<test>", "exec")
        except SyntaxError:
            return None
        src = dedent(segment(lines, stmt))
        steps.append(("test" if uses and has_assert else "setup", code,
                      clip(src.strip() or ast.dump(stmt), 200), stmt, uses))
    if not any(kind == "test" for kind, *_ in steps):
        return None
    return steps


def _scan(stmt):
    """One walk over ``stmt``: the names it reads or writes, the names it stores, the
    functions and classes it defines, and whether it contains an ``assert``."""
    names, stored, defined = set(), set(), set()
    has_assert = False
    for n in ast.walk(stmt):
        t = type(n)
        if t is ast.Name:
            names.add(n.id)
            if type(n.ctx) is ast.Store:
                stored.add(n.id)
        elif t is ast.Assert:
            has_assert = True
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef:
            defined.add(n.name)
    return names, stored, defined, has_assert


def segment(lines, node):
    """Source of ``node``, first line padded to its column (``ast.get_source_segment`` is
    linear in the file, so calling it per statement would be quadratic)."""
    try:
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            text = lines[first].encode()[node.col_offset:node.end_col_offset].decode()
            return " " * node.col_offset + text
        head = lines[first].encode()[node.col_offset:].decode()
        tail = lines[last].encode()[:node.end_col_offset].decode()
        return "\n".join([" " * node.col_offset + head, *lines[first + 1:last], tail])
    except (AttributeError, IndexError, TypeError, UnicodeDecodeError):
        return ""


def dedent(text):
    """``textwrap.dedent`` (whose import, with its regexes, costs a millisecond per run):
    whitespace-only lines become empty, then the longest run of spaces and tabs common to the
    other lines is removed from each of them."""
    lines = ["" if not line.strip(" \t") else line for line in text.split("\n")]
    margin = None
    for line in lines:
        if not line:
            continue
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if margin is None or margin.startswith(indent):
            margin = indent
        elif not indent.startswith(margin):
            i = 0
            while i < len(margin) and i < len(indent) and margin[i] == indent[i]:
                i += 1
            margin = margin[:i]
    if not margin:
        return "\n".join(lines)
    return "\n".join(line[len(margin):] if line else line for line in lines)
