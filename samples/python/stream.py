"""Streams a deterministic completion through the Python binding: stream.py MODEL [PROMPT]."""
import sys

import llm42

model = sys.argv[1]
prompt = sys.argv[2] if len(sys.argv) > 2 else "Once upon a time"
with llm42.SessionOptions() as options:
    options.set_model_path(model)
    session = llm42.Session(options)
with session, llm42.RequestOptions() as request:
    request.set_prompt(prompt)
    request.set_max_tokens(64)
    request.set_deterministic(True)
    print(prompt, end="", flush=True)
    with session.submit(request) as r:
        for text in r:  # chunks of verified text; the GIL is released while waiting
            print(text, end="", flush=True)
    print()
