"""A tool-calling loop written with the openai SDK and httpx: the environment's tools from
SHARPEN_TOOLS_FILE are passed to the model, each tool call it makes is executed at
SHARPEN_TOOL_URL and answered as a tool message, until the model answers in text, the
episode ends or TURNS model calls were made."""

import json
import os

import httpx
from openai import OpenAI

client = OpenAI(max_retries=0)
with open(os.environ["SHARPEN_TOOLS_FILE"], encoding="utf-8") as fh:
    tools = json.load(fh)
with open(os.environ["SHARPEN_TASK_FILE"], encoding="utf-8") as fh:
    task = fh.read()
messages = [
    {"role": "system", "content": "You are an agent that acts only through the tools. Reply "
                                  "with one tool call and nothing else."},
    {"role": "user", "content": task + '\n\nReply with one tool call only: one JSON object '
                                       '{"tool": NAME, "arguments": {...}}.'},
]
done = False
for _ in range(int(os.environ.get("TURNS", "3"))):
    reply = client.chat.completions.create(
        model=os.environ.get("SHARPEN_MODEL", "any"), messages=messages, tools=tools,
        temperature=0.0, max_tokens=120,
    )
    message = reply.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    if not message.tool_calls:
        print(message.content or "")
        break
    for call in message.tool_calls:
        result = httpx.post(os.environ["SHARPEN_TOOL_URL"], json={
            "name": call.function.name, "arguments": call.function.arguments,
            "tool_call_id": call.id}, timeout=60).json()
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": result["observation"]})
        done = done or result["terminated"] or result["truncated"]
    if done:
        break
