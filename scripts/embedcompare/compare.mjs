// Embeddings from Tandem's /v1/embeddings (through the official openai npm
// client) against llama.cpp's (node-llama-cpp's embedding context) on the
// same GGUF file. See README.md.
//
//   node compare.mjs MODEL.gguf BASE_URL [MODEL_NAME]
//
// Prints one JSON line per encoding format with each input's cosine and
// the cross-input cosines (how alike different inputs' vectors are, so the
// figure has a scale), then a summary line; exits 1 when a cosine is below
// 0.999.
import {getLlama} from "node-llama-cpp";
import OpenAI from "openai";

const [modelPath, baseURL, modelName = ""] = process.argv.slice(2);
if (!modelPath || !baseURL) {
  console.error("usage: node compare.mjs MODEL.gguf BASE_URL [MODEL_NAME]");
  process.exit(2);
}
const inputs = [
  "hello world",
  "the little girl saw a big dog.",
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
  "One day he went home with his mom and they made a cake.",
  "Tim and Sue ran to the tree; it was very big!",
  "what is the time?",
];

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const ctx = await model.createEmbeddingContext({contextSize: 512, threads: 1});
const ref = [];
for (const text of inputs) ref.push(Array.from((await ctx.getEmbeddingFor(text)).vector));

const cos = (a, b) => {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return d / Math.sqrt(na * nb);
};
const fromBase64 = (s) => {
  const b = Buffer.from(s, "base64");
  const out = new Array(b.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = b.readFloatLE(4 * i);
  return out;
};

const client = new OpenAI({baseURL, apiKey: process.env.OPENAI_API_KEY || "none"});
let worst = 1;
for (const format of ["float", "base64"]) {
  const res = await client.embeddings.create({model: modelName, input: inputs, encoding_format: format});
  const got = res.data.map((d) => (typeof d.embedding === "string" ? fromBase64(d.embedding) : d.embedding));
  const cosines = got.map((v, i) => cos(v, ref[i]));
  let cross = 0;
  for (let i = 0; i < got.length; i++) for (let j = 0; j < ref.length; j++) if (i !== j) cross = Math.max(cross, cos(got[i], ref[j]));
  worst = Math.min(worst, ...cosines);
  console.log(JSON.stringify({format, inputs: inputs.length, dim: got[0].length, usage: res.usage, model: res.model,
    cosines: cosines.map((c) => +c.toFixed(7)), one_minus_cosine: cosines.map((c) => +(1 - c).toExponential(2)),
    max_cross_input_cosine: +cross.toFixed(5)}));
}
console.log(JSON.stringify({model: modelPath, server: baseURL, min_cosine: +worst.toFixed(7), max_one_minus_cosine: +(1 - worst).toExponential(2), pass: worst >= 0.999}));
await ctx.dispose();
await model.dispose();
process.exit(worst >= 0.999 ? 0 : 1);
