// llama.cpp's tokenization (through node-llama-cpp, vocabulary only) of the
// strings in a JSON array, for comparison with Tandem's tokenizer.
//
// usage: TANDEM_NPM_DIR=DIR node llamacpp-tokenize.mjs VOCAB.gguf IN.json OUT.json
// DIR holds node_modules/node-llama-cpp (npm i -E node-llama-cpp@3.21.1).
// OUT.json: [{plain: ids (no BOS, specials as text), special: ids (no BOS,
// special tokens parsed), text: detokenized plain ids}] in input order.
import {join} from "node:path";
import {readFileSync, writeFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

const dir = process.env.TANDEM_NPM_DIR;
const {getLlama} = await import(pathToFileURL(join(dir, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const [path, inPath, outPath] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
console.error(`llama.cpp ${JSON.stringify(llama.llamaCppRelease)}`);
const model = await llama.loadModel({modelPath: path, vocabOnly: true});
const out = JSON.parse(readFileSync(inPath, "utf8")).map((s) => {
  const plain = Array.from(model.tokenize(s, false));
  const special = Array.from(model.tokenize(s, true));
  return {plain, special, text: model.detokenize(plain, false)};
});
writeFileSync(outPath, JSON.stringify(out));
