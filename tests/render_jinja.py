#!/usr/bin/env python3
"""Renders Jinja templates as Hugging Face transformers' apply_chat_template does: the reference
that tests/jinja_test.cc holds llm42's renderer (lib/chat/jinja_template.h) to, byte for byte.

Usage: render_jinja.py < cases.json > results.json
cases.json: [{"template": "...", "vars": {...}}, ...]; results.json: one entry per case,
{"out": "<rendering>"} or {"error": "<message>"} where the template fails to parse or render.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    """transformers' chat-template environment (its _compile_jinja_template)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    results = []
    for case in json.load(sys.stdin):
        try:
            out = env.from_string(case["template"]).render(**case["vars"])
            results.append({"out": out})
        except Exception as e:  # any failure: the renderer must fail too
            results.append({"error": "%s: %s" % (type(e).__name__, e)})
    sys.stdout.write(json.dumps(results, ensure_ascii=False))


if __name__ == "__main__":
    main()
