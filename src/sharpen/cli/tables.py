"""Tables that stay readable at 80 columns and in a log.

Rich fits a table to the console by wrapping cells at spaces; only when even the longest word
of every column cannot fit does it cut headers and ids to ``diffe…``. :func:`fit` then prints
the same rows as plain ``header: value`` records instead, and :func:`wide_console` is a console
as wide as the table needs (``--wide``: every cell on one line, nothing cut).
"""

from __future__ import annotations

import copy
from dataclasses import replace

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_UNBOUNDED = 100_000
"""A width no table reaches: measuring at it gives a table's natural widths, unclamped."""


def _widths(table: Table, console: Console) -> Measurement:
    return Measurement.get(console, console.options.update_width(_UNBOUNDED), table)


def _plain(cell: object, console: Console) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return console.render_str(cell).plain if isinstance(cell, str) else str(cell)


def records(table: Table, console: Console) -> Group:
    """``table`` as one block per row: ``header: value`` lines under the title, nothing cut."""
    headers = [_plain(c.header, console) for c in table.columns]
    cells = [[_plain(v, console) for v in c.cells] for c in table.columns]
    lines: list[RenderableType] = []
    if table.title is not None:
        lines.append(Text(_plain(table.title, console), style="bold"))
    for i in range(table.row_count):
        values = [(h, col[i]) for h, col in zip(headers, cells, strict=True) if col[i].strip()]
        for j, (h, v) in enumerate(values):
            lines.append(Text(f"{'- ' if j == 0 else '  '}{h + ': ' if h else ''}{v}"))
    return Group(*lines)


def fit(table: Table, console: Console) -> RenderableType:
    """``table`` with column widths that fit ``console`` and keep every word whole (Rich's own
    squeeze cuts the widest columns, ids and headers included, to ``6e97…``); when even the
    longest words do not fit, :func:`records` of it. ``table`` itself is left as it is."""
    if any(not isinstance(v, str | Text) for c in table.columns for v in [c.header, *c.cells]):
        return table  # renderables inside: Rich measures them, nothing to cut
    texts = [[_plain(v, console) for v in [c.header, *c.cells]] for c in table.columns]
    natural = [max((cell_len(line) for t in col for line in t.splitlines()), default=1)
               for col in texts]
    longest = [n if c.no_wrap else max((cell_len(w) for t in col for w in t.split()), default=1)
               for c, col, n in zip(table.columns, texts, natural, strict=True)]
    room = console.width - (_widths(table, console).maximum - sum(natural))  # less borders, padding
    if sum(natural) <= room:
        return table
    if sum(longest) > room:
        return records(table, console)
    widths = list(natural)
    while sum(widths) > room:  # narrow the widest column that still has words to wrap
        j = max((i for i in range(len(widths)) if widths[i] > longest[i]), key=widths.__getitem__)
        widths[j] -= 1
    fitted = copy.copy(table)
    fitted.columns = [replace(c, width=w) for c, w in zip(table.columns, widths, strict=True)]
    return fitted


def wide_console(table: Table, *, stderr: bool = False) -> Console:
    """A console as wide as ``table`` is with every cell on one line (at least 80 columns)."""
    natural = _widths(table, Console(width=_UNBOUNDED, stderr=stderr)).maximum
    return Console(width=max(80, natural), stderr=stderr)


def print_table(table: Table, *, wide: bool = False, console: Console | None = None) -> None:
    """Print ``table``: ``wide``, at its natural width; else fitted to the console."""
    if wide:
        wide_console(table).print(table)
        return
    out = console or Console()
    out.print(fit(table, out))
