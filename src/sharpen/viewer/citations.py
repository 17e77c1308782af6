"""Step citations in a judge's explanation (``[S3]``) as links to that step of the trajectory.

A judge's text is model output, so it is never marked safe: :func:`cite_links` splits it at
each citation, escapes every piece of text, and builds each link from the step number alone.
"""

from __future__ import annotations

from urllib.parse import quote

from markupsafe import Markup, escape

from sharpen.judges.transcript import STEP_ID


def step_href(trajectory_id: str, index: int, per_page: int, page: int | None = None) -> str:
    """Where step ``index`` is: its anchor alone when it is on ``page`` (the page shown),
    else the trajectory page that holds it."""
    at = index // per_page + 1
    if page is not None and at == page:
        return f"#step-{index}"
    return f"/t/{quote(trajectory_id, safe='')}?page={at}#step-{index}"


def cite_links(text: str, trajectory_id: str, n_steps: int, per_page: int,
               page: int | None = None) -> Markup:
    """``text`` escaped, each ``[S<i>]`` naming a step the trajectory has turned into a link
    to it (``a.cite``); a citation of a step it lacks stays text."""
    out: list[Markup] = []
    pos = 0
    for m in STEP_ID.finditer(text):
        out.append(escape(text[pos:m.start()]))
        i = int(m[1])
        if i < n_steps:
            out.append(Markup('<a class="cite" href="{}">{}</a>').format(
                step_href(trajectory_id, i, per_page, page), m[0]))
        else:
            out.append(escape(m[0]))
        pos = m.end()
    out.append(escape(text[pos:]))
    return Markup("").join(out)
