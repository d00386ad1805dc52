"""render.py renders every conversation of conversations.json with every
chat template of families.json as Hugging Face transformers does
(apply_chat_template: Jinja2's ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loop controls; tojson as json.dumps with
ensure_ascii=False; raise_exception; strftime_now) and writes one JSON file
per family, in the format of render.mjs:

    python3 render.py OUTDIR

Only Jinja2 is needed (transformers itself is not imported). strftime_now
reads a clock pinned to 2026-01-05 12:00 UTC, as render.mjs pins Date.
The Go test chat_reference_test.go compares Tandem with these renderings;
the files in golden-python/ were written by this script, never by the Go
code.
"""

import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK = datetime.datetime(2026, 1, 5, 12, 0, 0)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' tojson: json.dumps, ensure_ascii off, no HTML escaping.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return CLOCK.strftime(format)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 render.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(HERE, "families.json"), encoding="utf-8") as f:
        families = json.load(f)
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    for fam in families:
        with open(os.path.join(HERE, fam["template"]), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        cases = []
        for c in convs["conversations"]:
            ctx = dict(c.get("kwargs") or {})
            ctx.update(
                messages=c["messages"],
                tools=convs["tools"] if c.get("tools") else None,
                documents=None,
                add_generation_prompt=c.get("add_generation_prompt", True),
                bos_token=fam["bos_token"],
                eos_token=fam["eos_token"],
            )
            try:
                cases.append({"name": c["name"], "output": tmpl.render(**ctx)})
            except Exception as e:  # the template raised, or failed
                cases.append({"name": c["name"], "error": str(e)})
        with open(os.path.join(out, fam["family"] + ".json"), "w", encoding="utf-8") as f:
            json.dump({"family": fam["family"], "cases": cases}, f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
