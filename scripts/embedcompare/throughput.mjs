// Embedding throughput of a server through the openai npm client, in
// inputs per second, at a batch (inputs per request) of 1 and 32:
//
//   node throughput.mjs BASE_URL [SECONDS] [MODEL_NAME]
//
// Each batch size runs for SECONDS (default 10) with one request in flight.
import OpenAI from "openai";

const [baseURL, secs = "10", modelName = ""] = process.argv.slice(2);
const client = new OpenAI({baseURL, apiKey: process.env.OPENAI_API_KEY || "none"});
const text = (i) => `Once upon a time, there was a little girl named Lily ${i}. She loved to play outside in the park with her dog.`;
for (const batch of [1, 32]) {
  const until = Date.now() + 1000 * Number(secs);
  let n = 0, reqs = 0, tokens = 0;
  const t0 = performance.now();
  while (Date.now() < until) {
    const input = Array.from({length: batch}, (_, k) => text(n + k));
    const res = await client.embeddings.create({model: modelName, input});
    n += res.data.length;
    tokens += res.usage.prompt_tokens;
    reqs++;
  }
  const s = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({batch, requests: reqs, inputs: n, seconds: +s.toFixed(2), inputs_per_s: +(n / s).toFixed(1), tokens_per_s: +(tokens / s).toFixed(0)}));
}
