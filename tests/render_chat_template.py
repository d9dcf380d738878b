#!/usr/bin/env python3
"""Renders a Jinja chat template as Hugging Face transformers' apply_chat_template does.

Usage: render_chat_template.py TEMPLATE.jinja < request.json
request.json: {"messages": [...], "bos_token": "...", "eos_token": "..."}; the rendering (with
add_generation_prompt) goes to stdout as UTF-8.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(sys.argv[1], encoding="utf-8") as f:
        template = env.from_string(f.read())
    request = json.load(sys.stdin)
    rendered = template.render(messages=request["messages"], bos_token=request["bos_token"],
                               eos_token=request["eos_token"], add_generation_prompt=True)
    sys.stdout.buffer.write(rendered.encode("utf-8"))


if __name__ == "__main__":
    main()
