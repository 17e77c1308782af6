"""The ``tools`` and ``tool-schema`` checks: an environment's tools as the model sees them.

Tool names are unique; each tool's ``parameters`` is a valid JSON Schema (draft 2020-12, the
dialect of OpenAI-style tool definitions) of type ``object``; a ``text_argument`` names one of
its properties (the text protocol fills it from a fenced block).
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from sharpen.checks.report import CheckReport


def check_tools(tools: Any, r: CheckReport) -> None:
    """Record the ``tools`` / ``tool-schema`` checks of ``tools`` on ``r``."""
    if not isinstance(tools, list) or not tools:
        r.fail("tools", f"tools is {tools!r}: set self.tools to a non-empty list of ToolSpec")
        return
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        r.fail("tools", f"tool names repeat ({', '.join(names)}): give each tool its own name")
    for tool in tools:
        try:
            Draft202012Validator.check_schema(tool.parameters)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(top level)"
            r.fail("tool-schema", f"tool {tool.name!r}: parameters is not valid JSON Schema: "
                   f"{exc.message} at {where}; fix the schema (draft 2020-12)")
            continue
        if tool.parameters.get("type") != "object":
            r.fail("tool-schema", f"tool {tool.name!r}: parameters must be a schema of type "
                   f"'object' (got type {tool.parameters.get('type')!r}); put the arguments "
                   "under 'properties'")
            continue
        props = tool.parameters.get("properties") or {}
        if tool.text_argument is not None and tool.text_argument not in props:
            r.fail("tool-schema", f"tool {tool.name!r}: text_argument {tool.text_argument!r} "
                   f"is not one of its properties ({', '.join(props) or 'none'}); name a "
                   "string property, or set text_argument=None")
    if not r.failed("tools") and not r.failed("tool-schema"):
        r.pass_("tools", f"{len(tools)} tool(s) ({', '.join(names)}), each valid JSON Schema")
