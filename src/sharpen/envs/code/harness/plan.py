"""Planning ``check(candidate)`` into statements: which are test cases and which are setup.

A top-level statement of ``check`` that contains an ``assert`` and (directly, or through names
set from it) uses ``candidate`` is one test case; any other statement is setup. Each step is
``(kind, code, source, node, uses, call)``: ``kind`` ``"test"`` or ``"setup"``, its compiled
code, its source (dedented, clipped), its AST node, whether it uses the candidate, and
``call``: for an ``assert`` that certainly calls the candidate exactly once with literal
arguments (``assert candidate(1, [2]) == 3``, ``assert abs(candidate(x=1.5) - 0.5) < 1e-6``),
those arguments as ``(args, kwargs)``, so that the checker may send the call ahead; else
``None``.
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
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
            first.value.value, str):
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
        kind = "test" if uses and has_assert else "setup"
        call = literal_call(stmt, names & tainted) if kind == "test" else None
        steps.append((kind, code, clip(src.strip() or ast.dump(stmt), 200), stmt, uses, call))
    if not any(kind == "test" for kind, *_ in steps):
        return None
    return steps


def literal_call(stmt, used):
    """``(args, kwargs)`` of the one call of the candidate that ``stmt`` certainly makes, when
    ``stmt`` is an ``assert`` whose only use of the candidate's names (``used``) is that call,
    with literal arguments, evaluated whatever the outcome: not inside ``and``/``or``, a
    conditional expression, a lambda, a comprehension or the message, nor in a later link of a
    comparison chain. ``None`` otherwise."""
    if type(stmt) is not ast.Assert or len(used) != 1:
        return None
    name = next(iter(used))
    test = stmt.test
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        test = test.operand
    roots = [test.left, test.comparators[0]] if type(test) is ast.Compare else [test]
    found = None
    for root in roots:
        for n in ast.walk(root):
            if type(n) in _CONDITIONAL:
                return None
            if type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == name:
                if found is not None:
                    return None
                found = n
    uses = sum(1 for n in ast.walk(stmt) if type(n) is ast.Name and n.id == name)
    if found is None or uses != 1:  # the name elsewhere (a later link, the message, ...)
        return None
    if any(type(a) is ast.Starred for a in found.args) or any(
            k.arg is None for k in found.keywords):
        return None
    try:
        return ([ast.literal_eval(a) for a in found.args],
                {k.arg: ast.literal_eval(k.value) for k in found.keywords})
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


_CONDITIONAL = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)


def _scan(stmt):
    """One walk over ``stmt``: the names it reads or writes, the names it stores, the
    functions and classes it defines, and whether it contains an ``assert``."""
    names, stored, defined = set(), set(), set()
    has_assert = False
    for n in ast.walk(stmt):
        if type(n) is ast.Name:
            names.add(n.id)
            if type(n.ctx) is ast.Store:
                stored.add(n.id)
        elif type(n) is ast.Assert:
            has_assert = True
        elif type(n) is ast.FunctionDef or type(n) is ast.AsyncFunctionDef or type(n) is ast.ClassDef:
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
