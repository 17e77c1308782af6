"""A one-shot answerer written with the openai SDK alone: the task on stdin, one model call,
the reply on stdout (the external agent submits it as the final answer). With STREAM=1 the
reply is streamed; with ANSWER_FILE=1 it goes to SHARPEN_ANSWER_FILE, and stdout gets noise."""

import os
import sys

from openai import OpenAI

task = sys.stdin.read()
client = OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY come from sharpen
model = client.models.list().data[0].id
request = {
    "model": model,
    "messages": [
        {"role": "system", "content": "Complete the Python function. Reply with the whole "
                                      "function in one ```python code block."},
        {"role": "user", "content": task},
    ],
    "temperature": 0.0, "max_tokens": 160,
}
if os.environ.get("STREAM"):
    chunks = client.chat.completions.create(**request, stream=True)
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
else:
    answer = client.chat.completions.create(**request).choices[0].message.content
if os.environ.get("ANSWER_FILE"):
    with open(os.environ["SHARPEN_ANSWER_FILE"], "w", encoding="utf-8") as fh:
        fh.write(answer)
    print("log: not the answer")
else:
    print(answer)
