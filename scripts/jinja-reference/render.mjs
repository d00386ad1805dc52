// render.mjs renders the reference renderings of internal/jinja's tests
// with @huggingface/jinja, the Jinja engine of transformers.js:
//
//	node render.mjs corpus      # internal/jinja/testdata/corpus/node/*.json
//	node render.mjs semantics   # internal/jinja/testdata/semantics/node.json
//
// TANDEM_NPM_DIR names the folder whose node_modules holds
// @huggingface/jinja (default /tmp/tandem-npm; see README.md). The inputs
// are the ones render.py reads, rendered the same way (tools and documents
// null when absent, as transformers passes them; strftime_now's clock
// pinned to 2026-01-05 12:00 UTC). The Go tests compare the renderer with
// these files; they are written by this script, never by the Go code.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const testdata = path.join(here, "..", "..", "internal", "jinja", "testdata");
const npmDir = process.env.TANDEM_NPM_DIR || "/tmp/tandem-npm";
const require = createRequire(path.join(npmDir, "node_modules", "x.js"));
const { Template } = require("@huggingface/jinja");

const RealDate = Date;
const fixedTime = RealDate.UTC(2026, 0, 5, 12, 0, 0);
globalThis.Date = class extends RealDate {
  constructor(...a) {
    super(...(a.length ? a : [fixedTime]));
  }
  static now() {
    return fixedTime;
  }
};

function render(source, ctx) {
  try {
    return { output: new Template(source).render(ctx) };
  } catch (e) {
    return { error: String(e.message || e), error_type: e.constructor?.name || "Error" };
  }
}

function write(file, data) {
  fs.writeFileSync(file, JSON.stringify(data, null, 1) + "\n");
}

// readCases reads cases.txt as render.py does.
function readCases(file) {
  const cases = [];
  let cur = null;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("=== ")) {
      cur = { name: line.slice(4), lines: [], vars: {} };
      cases.push(cur);
    } else if (!cur) {
      continue;
    } else if (line.startsWith("--- vars ")) {
      cur.vars = JSON.parse(line.slice("--- vars ".length));
    } else {
      cur.lines.push(line);
    }
  }
  for (const c of cases) {
    while (c.lines.length && c.lines[c.lines.length - 1] === "") c.lines.pop();
    c.template = c.lines.join("\n");
  }
  return cases;
}

function semantics() {
  const dir = path.join(testdata, "semantics");
  const defaults = JSON.parse(fs.readFileSync(path.join(dir, "vars.json"), "utf8"));
  const out = readCases(path.join(dir, "cases.txt")).map((c) => ({
    name: c.name,
    ...render(c.template, structuredClone({ ...defaults, ...c.vars })),
  }));
  write(path.join(dir, "node.json"), out);
}

function corpus() {
  const dir = path.join(testdata, "corpus");
  const templates = JSON.parse(fs.readFileSync(path.join(dir, "templates.json"), "utf8"));
  const convs = JSON.parse(fs.readFileSync(path.join(dir, "conversations.json"), "utf8"));
  fs.mkdirSync(path.join(dir, "node"), { recursive: true });
  for (const t of templates) {
    const source = fs.readFileSync(path.join(dir, "templates", t.file), "utf8");
    const cases = convs.conversations.map((c) => ({
      name: c.name,
      ...render(
        source,
        structuredClone({
          ...(c.kwargs || {}),
          messages: c.messages,
          tools: c.tools ? convs.tools[c.tools] : null,
          documents: null,
          add_generation_prompt: c.add_generation_prompt ?? true,
          bos_token: t.bos_token,
          eos_token: t.eos_token,
        }),
      ),
    }));
    write(path.join(dir, "node", t.file.replace(/\.jinja$/, ".json")), cases);
  }
}

const mode = process.argv[2];
if (mode === "corpus") corpus();
else if (mode === "semantics") semantics();
else {
  console.error("usage: node render.mjs corpus|semantics");
  process.exit(2);
}
