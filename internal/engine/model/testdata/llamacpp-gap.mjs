// llama.cpp's greedy continuations (through node-llama-cpp, prebuilt, CPU, one
// thread, F16 KV cache, flash attention off) of text prompts, with the gap
// between the top two candidates' logits at every step, so that a divergence
// from Tandem can be told apart from a near tie.
//
// Flash attention is off explicitly: node-llama-cpp's default ("auto") turns
// it on for the CPU, where ggml's flash attention takes the softmax online
// and sums the weighted values in F16. Its non-flash path takes the softmax
// whole and sums the values in F32 (from F16 weights), as Tandem's attention
// does: the reference the tests hold Tandem to (on a q8_0 gemma4 file the
// two llama.cpp paths part at a gap of 0.06, above the near-tie bound).
// TANDEM_LLAMACPP_FLASH=1 turns it on (to compare the two).
//
// usage: TANDEM_NPM_DIR=DIR node llamacpp-gap.mjs MODEL.gguf N PROMPT...
// DIR holds node_modules/node-llama-cpp (npm i -E node-llama-cpp@3.21.1).
// Prints one JSON line per prompt: {prompt_ids (BOS first), ids, gaps}; the
// llama.cpp release goes to stderr.
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const dir = process.env.TANDEM_NPM_DIR;
const {getLlama} = await import(pathToFileURL(join(dir, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const [path, n, ...prompts] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
console.error(`llama.cpp ${JSON.stringify(llama.llamaCppRelease)}`);
const model = await llama.loadModel({modelPath: path});
for (const p of prompts) {
  const ids = [model.tokens.bos, ...model.tokenize(p, false)];
  const ctx = await model.createContext({contextSize: 1024, threads: 1, flashAttention: process.env.TANDEM_LLAMACPP_FLASH === "1"});
  const seq = ctx.getSequence();
  const out = [], gaps = [];
  // temperature 1 makes the probabilities the softmax of the raw logits (the
  // gap is then the logit difference); the token node-llama-cpp samples is
  // replaced by the greedy one below, and yieldEogToken keeps a sampled
  // end-of-generation token from ending the run (without it runs stopped
  // at random lengths, 0 to 24 ids)
  const gen = seq.evaluateWithMetadata(ids, {probabilities: true}, {temperature: 1, yieldEogToken: true});
  let r = await gen.next();
  while (!r.done) {
    let best = -1, p1 = -1, p2 = -1;
    for (const [tok, q] of r.value.probabilities) {
      if (q > p1) { p2 = p1; p1 = q; best = tok; } else if (q > p2) { p2 = q; }
    }
    out.push(best); gaps.push(Math.log(p1 / p2));
    if (out.length >= Number(n)) break;
    r = await gen.next(best);
  }
  console.log(JSON.stringify({prompt_ids: ids, ids: out, gaps}));
  await ctx.dispose();
}
