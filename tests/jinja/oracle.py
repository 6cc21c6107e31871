#!/usr/bin/python3
"""Renders chat templates the way transformers' apply_chat_template does, for tests/test_jinja*.

stdin: a JSON array of {"template": str, "context": {...}}; the context holds messages, tools,
add_generation_prompt, bos_token, eos_token and any extra variables.
stdout: a JSON array, one {"output": str} or {"error": str} per case, in order.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, case):
    try:
        return {"output": env.from_string(case["template"]).render(**case["context"])}
    except Exception as e:  # every failure is an expected outcome the C++ side must match
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    env = environment()
    cases = json.load(sys.stdin)
    json.dump([render(env, case) for case in cases], sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
