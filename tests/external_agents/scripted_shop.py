"""A toolshop agent that asks the model once (the tool loop's first request) and then acts
by rule through SHARPEN_TOOL_URL without tool call ids: it cancels the order named in the
task for the reason given and calls finish."""

import json
import os
import re

import httpx
from openai import OpenAI

client = OpenAI(max_retries=0)
with open(os.environ["SHARPEN_TOOLS_FILE"], encoding="utf-8") as fh:
    tools = json.load(fh)
with open(os.environ["SHARPEN_TASK_FILE"], encoding="utf-8") as fh:
    task = fh.read()
client.chat.completions.create(  # the same request as tool_loop.py's first: in the cassette
    model="any", tools=tools, temperature=0.0, max_tokens=120, messages=[
        {"role": "system", "content": "You are an agent that acts only through the tools. Reply "
                                      "with one tool call and nothing else."},
        {"role": "user", "content": task + '\n\nReply with one tool call only: one JSON object '
                                           '{"tool": NAME, "arguments": {...}}.'},
    ])
order = re.search(r"#W[0-9]{7}", task).group(0)
reason = re.search(r"the reason: ([a-z ]+)", task).group(1).strip()
for name, arguments in (("cancel_order", {"order_id": order, "reason": reason}), ("finish", {})):
    result = httpx.post(os.environ["SHARPEN_TOOL_URL"], timeout=60,
                        json={"name": name, "arguments": arguments}).json()
    print(name, result["observation"][:80])
