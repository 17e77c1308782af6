"""A program that sends the bridge requests it cannot serve and checks each is refused with
a client error (exit 1 if not): its mistakes are its own, never a fault of the episode."""

import os
import sys

import httpx

base = os.environ["OPENAI_BASE_URL"]
cases = [
    ("POST", f"{base}/chat/completions", {"messages": []}, 400),
    ("POST", f"{base}/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, 400),
    ("POST", f"{base}/chat/completions", b"not json", 400),
    ("POST", f"{base}/embeddings", {"input": "x"}, 404),
    ("GET", f"{base}/chat/completions", None, 405),
    ("POST", os.environ["SHARPEN_TOOL_URL"], {"arguments": {}}, 400),
    ("POST", os.environ["SHARPEN_TOOL_URL"], {"name": "submit", "arguments": "{not json"}, 400),
]
with httpx.Client(timeout=30) as client:
    for method, url, body, expected in cases:
        kw = {"content": body} if isinstance(body, bytes) else {"json": body}
        got = client.request(method, url, **(kw if body is not None else {})).status_code
        if got != expected:
            sys.exit(f"{method} {url} {body!r}: status {got}, expected {expected}")
print("no answer")
