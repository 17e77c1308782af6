"""Failure-taxonomy groups named by a judge model (optional: the taxonomy needs no model).

:func:`name_groups` shows the model each group's detectors, top terms and most common
signature, and asks for a short name (JSON ``{"name": ...}``, validated, re-asked once by
:func:`sharpen.judges.ask.ask`). A group whose reply never validates keeps its term name
(``named_by="terms"``); names the model repeats get the group's next term added. Counts,
intervals, terms and examples are never changed.
"""

from __future__ import annotations

from sharpen.diagnose.taxonomy import FailureGroup, Taxonomy, unique_names
from sharpen.judges.ask import JudgeError, ask
from sharpen.models.base import ChatModel

SYSTEM = ("You label groups of failed attempts of an AI agent. Reply with JSON only: "
          '{"name": "..."} — a short name (2 to 6 words) for the kind of failure.')
PROMPT = """Detectors that fired: {detectors}
Most characteristic terms: {terms}
A typical failure, as recorded (numbers and quoted values removed):
{signature}

Name this kind of failure in 2 to 6 words."""
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "minLength": 3,
                                                    "maxLength": 60}},
          "required": ["name"], "additionalProperties": False}
PARAMS = {"max_tokens": 40}


def prompt(group: FailureGroup) -> str:
    """The prompt that asks for ``group``'s name."""
    dets = ", ".join(f"{d} ({c})" for d, c in group.detectors.items()) or "none"
    return PROMPT.format(detectors=dets, terms=", ".join(group.terms),
                         signature=group.signature)


async def name_groups(taxonomy: Taxonomy, model: ChatModel) -> Taxonomy:
    """``taxonomy`` with each group named by ``model`` where its reply validates. The caller
    owns ``model`` (closes it)."""
    groups: list[FailureGroup] = []
    for g in taxonomy.groups:
        try:
            reply = await ask(model, SYSTEM, prompt(g), SCHEMA, PARAMS)
            name = " ".join(str(reply["name"]).split()).strip(" .")
        except JudgeError:
            name = ""
        groups.append(g.model_copy(update={"name": name, "named_by": "model"})
                      if len(name) >= 3 else g)
    unique_names(groups)
    return taxonomy.model_copy(update={"groups": groups, "named_with": model.name})
