"""Agents: loops that run an AgentSpec against an Environment."""

from sharpen.agents.text_protocol import ParseError, parse_text_action
from sharpen.agents.tool_agent import ToolAgent

__all__ = ["ParseError", "ToolAgent", "parse_text_action"]
