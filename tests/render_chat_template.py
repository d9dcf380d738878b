#!/usr/bin/env python3
"""Renders a Jinja chat template as Hugging Face transformers' apply_chat_template does.

Usage: render_chat_template.py TEMPLATE.jinja < request.json
request.json: {"messages": [...], "bos_token": "...", "eos_token": "...", optionally
"enable_thinking": false}; the rendering (with add_generation_prompt) goes to stdout as UTF-8, or,
where the template raises (a role it refuses), nothing and exit status 3.
"""
import json
import os
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_jinja import environment  # noqa: E402  transformers' environment, written once


def main():
    env = environment()
    with open(sys.argv[1], encoding="utf-8") as f:
        template = env.from_string(f.read())
    request = json.load(sys.stdin)
    extra = {k: request[k] for k in ("enable_thinking",) if k in request}
    try:
        rendered = template.render(messages=request["messages"], bos_token=request["bos_token"],
                                   eos_token=request["eos_token"], add_generation_prompt=True, **extra)
    except jinja2.exceptions.TemplateError as e:  # the template refuses the conversation
        sys.stderr.write("template error: %s\n" % e)
        sys.exit(3)
    sys.stdout.buffer.write(rendered.encode("utf-8"))


if __name__ == "__main__":
    main()
