"""A tool call's arguments rendered by type: code as highlighted code, structures as
pretty-printed JSON, text as text — never as one escaped JSON string.

Highlighting is Pygments on the server with CSS classes only (the CSP forbids inline
styles; the classes' colours are in ``static/viewer.css``). Pygments escapes every token
it emits, so its output is the one piece of model-written content the pages mark safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, JsonLexer, PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

CODE_KEYS = frozenset({"code", "source", "program", "solution", "script", "snippet", "function",
                       "body", "implementation", "cell", "query", "sql", "command", "cmd"})
"""Argument names whose string value is code (a multi-line string under any name that
looks like Python is code too)."""
DIFF_KEYS = frozenset({"patch", "diff"})
LANGUAGE_KEYS = ("language", "lang")
"""An argument that names the language of the call's code (``{"language": "rust", "code": ...}``)."""
PYTHON_HINTS = ("def ", "import ", "return ", "class ", "print(", "lambda ", "for ", "if ")

ArgKind = Literal["code", "json", "text", "scalar"]


@dataclass(frozen=True)
class ArgView:
    """One argument as the page shows it: its name, how it is rendered, and the HTML."""

    name: str
    kind: ArgKind
    html: Markup
    language: str = ""


_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")


def _lexer(name: str, value: str, language: str | None) -> Lexer | None:
    if language:
        try:
            return get_lexer_by_name(language)
        except ClassNotFound:
            pass
    if name.lower() in DIFF_KEYS:
        return DiffLexer()
    if name.lower() in CODE_KEYS or ("\n" in value and any(h in value for h in PYTHON_HINTS)):
        return PythonLexer()
    return None


def code_html(value: str, lexer: Lexer) -> Markup:
    """``value`` highlighted by ``lexer`` (escaped by Pygments; classes ``hl-*``)."""
    return Markup(highlight(value, lexer, _FORMATTER))  # Pygments escapes every token


def arg_views(arguments: dict[str, Any]) -> list[ArgView]:
    """Each argument of a tool call rendered by its type."""
    language = next((str(arguments[k]) for k in LANGUAGE_KEYS if isinstance(arguments.get(k), str)), None)
    out = []
    for name, value in arguments.items():
        if isinstance(value, str):
            lexer = _lexer(name, value, language)
            if lexer is not None:
                out.append(ArgView(name, "code", code_html(value, lexer), lexer.name))
            elif "\n" in value or len(value) > 80:
                out.append(ArgView(name, "text", escape(value)))
            else:
                out.append(ArgView(name, "scalar", escape(json.dumps(value, ensure_ascii=False))))
        elif isinstance(value, dict | list):
            pretty = json.dumps(value, indent=2, ensure_ascii=False)
            out.append(ArgView(name, "json", code_html(pretty, JsonLexer()), "JSON"))
        else:
            out.append(ArgView(name, "scalar", escape(json.dumps(value, ensure_ascii=False))))
    return out


def stylesheet() -> str:
    """The CSS of the ``hl-*`` classes (pasted into ``static/viewer.css``)."""
    return _FORMATTER.get_style_defs(".hl")
