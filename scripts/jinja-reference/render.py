"""render.py renders the reference renderings of internal/jinja's tests
with Python's Jinja2 set up as Hugging Face transformers sets it up for
apply_chat_template (an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loop controls and the {% generation %} tag; tojson as
json.dumps with ensure_ascii=False; raise_exception; strftime_now), which
is also what vLLM renders chat templates with:

    python3 render.py semantics   # internal/jinja/testdata/semantics/python.json
    python3 render.py corpus      # internal/jinja/testdata/corpus/python/*.json

Only Jinja2 is needed (transformers itself is not imported; this file
sets the environment up the way transformers' chat_template_utils does).
strftime_now reads a clock pinned to 2026-01-05 12:00, as render.mjs pins
Date, and as the Go tests pin the renderer's clock. The Go tests compare
the renderer with these files; they are written by this script, never by
the Go code.
"""

import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "..", "internal", "jinja", "testdata")
CLOCK = datetime.datetime(2026, 1, 5, 12, 0, 0)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, without the token tracking."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return CLOCK.strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, ctx):
    try:
        return {"output": env.from_string(source).render(**ctx)}
    except Exception as e:  # the template raised, or failed
        return {"error": str(e), "error_type": type(e).__name__}


def read_cases(path):
    """Reads cases.txt: "=== name", the template, an optional
    "--- vars JSON" line."""
    cases = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    cur = None
    for line in lines:
        if line.startswith("=== "):
            cur = {"name": line[4:], "lines": [], "vars": {}}
            cases.append(cur)
        elif cur is None:
            continue  # header comment
        elif line.startswith("--- vars "):
            cur["vars"] = json.loads(line[len("--- vars "):])
        else:
            cur["lines"].append(line)
    for c in cases:
        while c["lines"] and c["lines"][-1] == "":
            c["lines"].pop()
        c["template"] = "\n".join(c.pop("lines"))
    return cases


def semantics():
    d = os.path.join(TESTDATA, "semantics")
    with open(os.path.join(d, "vars.json"), encoding="utf-8") as f:
        defaults = json.load(f)
    env = environment()
    out = []
    for c in read_cases(os.path.join(d, "cases.txt")):
        ctx = dict(defaults)
        ctx.update(c["vars"])
        out.append({"name": c["name"], **render(env, c["template"], ctx)})
    write(os.path.join(d, "python.json"), out)


def corpus():
    d = os.path.join(TESTDATA, "corpus")
    with open(os.path.join(d, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(d, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    env = environment()
    os.makedirs(os.path.join(d, "python"), exist_ok=True)
    for t in templates:
        with open(os.path.join(d, "templates", t["file"]), encoding="utf-8") as f:
            source = f.read()
        cases = []
        for c in convs["conversations"]:
            ctx = dict(c.get("kwargs") or {})
            ctx.update(
                messages=c["messages"],
                tools=convs["tools"][c["tools"]] if c.get("tools") else None,
                documents=None,
                add_generation_prompt=c.get("add_generation_prompt", True),
                bos_token=t["bos_token"],
                eos_token=t["eos_token"],
            )
            cases.append({"name": c["name"], **render(env, source, ctx)})
        write(os.path.join(d, "python", t["file"].replace(".jinja", ".json")), cases)


def write(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("semantics", "corpus"):
        sys.exit("usage: python3 render.py semantics|corpus")
    {"semantics": semantics, "corpus": corpus}[sys.argv[1]]()
