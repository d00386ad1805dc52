// node record.mjs OUT.json NAME=MODEL.gguf ... : llama.cpp's token ids and embeddings of fixed inputs, per model.
import {getLlama} from "node-llama-cpp";
import {writeFileSync, readFileSync} from "node:fs";
import {createHash} from "node:crypto";
const [out, ...models] = process.argv.slice(2);
const inputs = ["hello world", "the little girl saw a big dog.", "Once upon a time, there was a little girl named Lily.", "Tim and Sue ran to the tree; it was very big!"];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const res = {};
for (const nm of models) {
  const [name, path] = nm.split("=");
  const m = await llama.loadModel({modelPath: path});
  const ctx = await m.createEmbeddingContext({contextSize: 512, threads: 1});
  const recs = [];
  for (const text of inputs) {
    const ids = Array.from(m.tokenize(text));
    ctx._prepareInput(ids);
    const e = await ctx.getEmbeddingFor(text);
    recs.push({text, ids, embedding: Array.from(e.vector).map((x) => Math.fround(x))});
  }
  res[name] = {sha256: createHash("sha256").update(readFileSync(path)).digest("hex"), inputs: recs};
  await ctx.dispose(); await m.dispose();
}
writeFileSync(out, JSON.stringify(res));
