"""The text protocol turns plain replies into actions, or into feedback the model can use."""

import pytest

from sharpen.agents.text_protocol import ParseError, parse_text_action, protocol_instructions
from sharpen.core.messages import ToolSpec

SUBMIT = ToolSpec(
    name="submit", description="Submit code.", text_argument="code",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)
LOOK = ToolSpec(name="look", description="Look around.",
                parameters={"type": "object", "properties": {}})


def test_fenced_block_fills_the_text_argument():
    reply = "Here you go:\n```python\ndef f(x):\n    return x + 1\n```\nDone."
    action = parse_text_action(reply, [SUBMIT])
    assert action.tool == "submit"
    assert action.arguments == {"code": "def f(x):\n    return x + 1\n"}


def test_block_defining_a_function_wins_over_an_example_block():
    reply = "```\nf(1)  # 2\n```\n```python\ndef f(x):\n    return x + 1\n```"
    assert parse_text_action(reply, [SUBMIT]).arguments["code"].startswith("def f")


def test_unfenced_code_is_accepted_from_the_first_def():
    reply = "Sure.\ndef f(x):\n    return x * 2"
    assert parse_text_action(reply, [SUBMIT]).arguments["code"] == "def f(x):\n    return x * 2"


def test_json_tool_call_names_a_known_tool():
    reply = 'I will look.\n```json\n{"tool": "look", "arguments": {}}\n```'
    action = parse_text_action(reply, [SUBMIT, LOOK])
    assert action.tool == "look" and action.arguments == {}


def test_json_with_non_object_arguments_is_explained():
    with pytest.raises(ParseError, match="must be a JSON object"):
        parse_text_action('{"tool": "look", "arguments": [1]}', [LOOK])


def test_prose_without_code_is_invalid_with_a_hint():
    with pytest.raises(ParseError, match="python code block"):
        parse_text_action("I think the answer is to add one.", [SUBMIT])


def test_reply_cut_inside_a_code_block_is_reported_as_cut():
    with pytest.raises(ParseError, match="cut off"):
        parse_text_action("```python\ndef f(x):\n    return", [SUBMIT], cut_off=True)


def test_unclosed_block_at_a_natural_stop_is_taken():
    action = parse_text_action("```python\ndef f(x):\n    return 1\n", [SUBMIT])
    assert action.arguments["code"] == "def f(x):\n    return 1\n"


def test_without_a_text_tool_only_json_is_understood():
    with pytest.raises(ParseError, match='"tool"'):
        parse_text_action("def f(): pass", [LOOK])


def test_instructions_name_the_tool_and_its_argument():
    text = protocol_instructions([SUBMIT])
    assert "```python" in text and "submit" in text and "code" in text
    assert "look" in protocol_instructions([SUBMIT, LOOK])


def test_a_tool_can_say_how_its_text_answer_is_phrased():
    move = ToolSpec(name="move", description="Move.", text_argument="direction",
                    text_hint="To move, reply with one direction in a ``` block",
                    parameters={"type": "object", "properties": {"direction": {"type": "string"}}})
    text = protocol_instructions([move])
    assert text.startswith("To move, reply with one direction") and "python" not in text
    assert parse_text_action("```\nup\n```", [move]).arguments == {"direction": "up\n"}
    # A reply cut inside its block is told the fix in the tool's words, not "shorter code".
    with pytest.raises(ParseError) as cut:
        parse_text_action("I will think step by step.\n```\nFirst, the", [move], cut_off=True)
    assert str(cut.value) == ("Your reply was cut off before its ``` block was closed. To move, "
                              "reply with one direction in a ``` block, and nothing else.")
