// llama.cpp's embedding throughput on a GGUF file (node-llama-cpp's
// embedding context embeds one input at a time):
//
//   node llamacpp-throughput.mjs MODEL.gguf [THREADS] [INPUTS]
//
// Prints inputs/s of wall time and CPU milliseconds per input (the
// process's user+sys time, which holds on a loaded machine).
import {getLlama} from "node-llama-cpp";

const [modelPath, threads = "2", count = "20"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const ctx = await model.createEmbeddingContext({contextSize: 512, threads: Number(threads)});
const text = (i) => `Once upon a time, there was a little girl named Lily ${i}. She loved to play outside in the park with her dog.`;
await ctx.getEmbeddingFor(text(-1)); // warm up
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < Number(count); i++) await ctx.getEmbeddingFor(text(i));
const s = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({engine: "llama.cpp", threads: Number(threads), inputs: Number(count), seconds: +s.toFixed(2),
  inputs_per_s: +(Number(count) / s).toFixed(2), cpu_ms_per_input: +((cpu.user + cpu.system) / 1000 / Number(count)).toFixed(1)}));
await ctx.dispose();
await model.dispose();
