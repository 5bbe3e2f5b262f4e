// The npm SDK's evaluation latency for `meshlife bench` (engine node-sdk).
//
// node bench.js MODULE BUDGET_MS name=input.json ...
// Prints [{"input", "median_ns", "p99_ns", "samples"}] on stdout.
"use strict";

const fs = require("fs");
const { loadPolicySync } = require("@open-policy-agent/opa-wasm");

const [modulePath, budgetText, ...inputArguments] = process.argv.slice(2);
if (!modulePath || !budgetText || inputArguments.length === 0) {
  console.error("usage: node bench.js MODULE BUDGET_MS name=input.json ...");
  process.exit(2);
}
const budgetNs = BigInt(Number(budgetText)) * 1000000n;
const policy = loadPolicySync(fs.readFileSync(modulePath));
const figures = [];
for (const argument of inputArguments) {
  const [name, file] = argument.split("=");
  // The SDK takes a JavaScript value; parsing it is the caller's cost, not the evaluation's.
  const input = JSON.parse(fs.readFileSync(file, "utf8"));
  for (let i = 0; i < 3; i++) policy.evaluate(input);
  const samples = [];
  const start = process.hrtime.bigint();
  while (samples.length < 15 || (process.hrtime.bigint() - start < budgetNs && samples.length < 2000000)) {
    const began = process.hrtime.bigint();
    policy.evaluate(input);
    samples.push(Number(process.hrtime.bigint() - began));
  }
  samples.sort((a, b) => a - b);
  const at = (fraction) => samples[Math.round((samples.length - 1) * fraction)];
  figures.push({ input: name, median_ns: at(0.5), p99_ns: at(0.99), samples: samples.length });
}
process.stdout.write(JSON.stringify(figures));
