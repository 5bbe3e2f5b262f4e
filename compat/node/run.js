// The npm SDK (@open-policy-agent/opa-wasm) side of the compatibility matrix.
//
// node run.js --module dist/meshlife.wasm --context-module target/compat/meshlife.abi-1.1.wasm \
//             --fixtures target/compat/fixtures.json --exhausting target/compat/exhausting.json
//
// Prints {"columns": [...], "checks": [...]} (see compat/src/external.rs) on stdout.
"use strict";

const fs = require("fs");
const path = require("path");
const { loadPolicy, loadPolicySync } = require("@open-policy-agent/opa-wasm");

const HOST = "npm @open-policy-agent/opa-wasm";
// The package exports no ./package.json, so read it beside the resolved entry point.
const VERSION = JSON.parse(
  fs.readFileSync(path.join(path.dirname(require.resolve("@open-policy-agent/opa-wasm")), "..", "package.json"), "utf8"),
).version;
const ENTRYPOINT = "meshlife/violation";
const INVENTORY = { inventory: { cluster: {}, namespace: {} } };

function parseArguments(argv) {
  const options = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    if (!key.startsWith("--") || i + 1 >= argv.length) {
      throw new Error(`usage: run.js --module M --context-module M --fixtures F --exhausting E (got ${key})`);
    }
    options[key.slice(2)] = argv[i + 1];
  }
  for (const required of ["module", "context-module", "fixtures", "exhausting"]) {
    if (!options[required]) throw new Error(`--${required} is required`);
  }
  return options;
}

function loadFixtures(indexPath) {
  const directory = path.dirname(indexPath);
  return JSON.parse(fs.readFileSync(indexPath, "utf8")).map((entry) => {
    if (entry.file === null || entry.file === undefined) {
      // An absent input is passed as `undefined`: the SDK then sends address 0, length 0.
      return { id: entry.id, input: undefined, text: "" };
    }
    const text = fs.readFileSync(path.join(directory, entry.file), "utf8");
    return { id: entry.id, input: JSON.parse(text), text };
  });
}

// The bytes the SDK hands the module, when they are not the fixture's: JSON.parse turns integers
// beyond 2^53 into doubles, and the opa_eval path sends any falsy input (null) as no input.
function sentText(fixture, fastPath) {
  if (fixture.input === undefined) return undefined;
  if (fastPath && !fixture.input) return "";
  const sent = JSON.stringify(fixture.input);
  return sent === fixture.text ? undefined : sent;
}

// The `msg` strings of a result set, or an error saying why it is not one.
function readResultSet(resultSet) {
  if (!Array.isArray(resultSet) || resultSet.length !== 1 || !Array.isArray(resultSet[0].result)) {
    return { error: `not a one-binding result set: ${JSON.stringify(resultSet).slice(0, 200)}` };
  }
  const msgs = [];
  for (const violation of resultSet[0].result) {
    if (typeof violation.msg !== "string") {
      return { error: `a violation without a string msg: ${JSON.stringify(violation).slice(0, 200)}` };
    }
    msgs.push(violation.msg);
  }
  return { msgs };
}

function evaluateOne(policy, input) {
  try {
    return readResultSet(policy.evaluate(input, ENTRYPOINT));
  } catch (error) {
    return { error: String(error && error.stack ? error.stack.split("\n")[0] : error) };
  }
}

// With `exhausting`, the same instance first evaluates that input (which must be refused) before
// each fixture; what it answered goes to `refusals`.
function evaluateAll(policy, fixtures, fastPath, exhausting) {
  const results = {};
  const refusals = {};
  for (const fixture of fixtures) {
    if (exhausting !== undefined) refusals[fixture.id] = evaluateOne(policy, exhausting);
    const result = evaluateOne(policy, fixture.input);
    const sent = sentText(fixture, fastPath);
    if (sent !== undefined) result.sent = sent;
    results[fixture.id] = result;
  }
  return exhausting === undefined ? { results } : { results, refusals };
}

// 1,000 evaluations each of a deny, an allow and an undefined input: the memory must not grow
// after the first 100 (heap resets between evaluations).
function memoryStability(policy, fixtures) {
  const deny = fixtures.find((f) => f.input && f.id === fixtures.denyId);
  const allow = fixtures.find((f) => f.input && f.id === fixtures.allowId);
  const inputs = [deny.input, allow.input, undefined];
  let afterWarmUp = 0;
  for (let i = 0; i < 1000; i++) {
    for (const input of inputs) policy.evaluate(input, ENTRYPOINT);
    if (i === 99) afterWarmUp = policy.mem.buffer.byteLength;
  }
  const end = policy.mem.buffer.byteLength;
  return {
    ok: end === afterWarmUp,
    detail: `3,000 evaluations: ${afterWarmUp} bytes after 300, ${end} bytes after 3,000`,
  };
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const module = fs.readFileSync(options.module);
  const contextModule = fs.readFileSync(options["context-module"]);
  const fixtures = loadFixtures(options.fixtures);
  const index = JSON.parse(fs.readFileSync(options.fixtures, "utf8"));
  fixtures.denyId = index.find((entry) => entry.group === "400KB").id;
  fixtures.allowId = index.find((entry) => entry.group === "empty").id;
  const exhausting = JSON.parse(fs.readFileSync(options.exhausting, "utf8"));
  // The "refusals then valid inputs" columns (compat/src/matrix.rs CAPPED_PAGES, REFUSALS_HOW):
  // the memory as the reproduction capped it, hundreds of refusals on one instance.
  const refusalsHow = "memory capped at 16 pages, an out-of-memory refusal before every fixture";
  const capped = { initial: 2, maximum: 16 };

  const runs = [
    { how: "loadPolicy, default memory (5 pages), opa_eval", fastPath: true, load: () => loadPolicy(module) },
    {
      how: "loadPolicy, memory {initial: 2, maximum: 8}, opa_eval",
      fastPath: true,
      load: () => loadPolicy(module, { initial: 2, maximum: 8 }),
      memoryCapped: true,
    },
    { how: "loadPolicySync, opa_eval", fastPath: true, load: async () => loadPolicySync(module) },
    {
      how: "loadPolicy, setData(inventory), opa_eval",
      fastPath: true,
      load: async () => {
        const policy = await loadPolicy(module);
        policy.setData(INVENTORY);
        return policy;
      },
    },
    {
      how: "loadPolicy, eval-context path (copy patched to ABI 1.1)",
      load: () => loadPolicy(contextModule),
    },
    {
      how: `${refusalsHow}: loadPolicy, memory {initial: 2, maximum: 16}, opa_eval`,
      fastPath: true,
      load: () => loadPolicy(module, capped),
      memoryCapped: true,
      refusals: true,
    },
    {
      how: `${refusalsHow}: loadPolicy, memory {initial: 2, maximum: 16}, eval-context path (ABI 1.1 copy)`,
      load: () => loadPolicy(contextModule, capped),
      memoryCapped: true,
      refusals: true,
    },
    {
      how: "loadPolicySync, setData(inventory), eval-context path (ABI 1.1 copy)",
      load: async () => {
        const policy = loadPolicySync(contextModule);
        policy.setData(INVENTORY);
        return policy;
      },
    },
  ];
  const columns = [];
  const checks = [];
  for (const run of runs) {
    const policy = await run.load();
    columns.push({
      host: HOST,
      version: VERSION,
      how: run.how,
      memory_capped: Boolean(run.memoryCapped),
      ...evaluateAll(policy, fixtures, Boolean(run.fastPath), run.refusals ? exhausting : undefined),
    });
    if (run.refusals) {
      // The cap held: the refusals must come from the maximum, not from a memory that grew.
      const pages = policy.mem.buffer.byteLength / 65536;
      checks.push({
        host: HOST,
        name: `memory stayed within the cap (${run.how})`,
        ok: pages <= capped.maximum,
        detail: `${pages} pages after the column (maximum ${capped.maximum})`,
      });
    }
    if (!run.memoryCapped) {
      checks.push({ host: HOST, name: `memory stable (${run.how})`, ...memoryStability(policy, fixtures) });
    }
  }
  process.stdout.write(JSON.stringify({ columns, checks }));
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : error);
  process.exit(1);
});
