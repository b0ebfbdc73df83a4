// validate-trace.mjs — checks Chrome/Perfetto timelines against the Trace
// Event Format as trace-event.schema.json states it, with ajv (a maintained
// JSON Schema validator from npm). Prints each file's verdict; exits 1 when
// any file fails.
//   node tests/browser/validate-trace.mjs FILE.json...
import Ajv from "ajv";
import { readFileSync } from "node:fs";

const files = process.argv.slice(2);
if (!files.length) {
  console.error("usage: node validate-trace.mjs FILE.json...");
  process.exit(2);
}
const schema = JSON.parse(readFileSync(new URL("./trace-event.schema.json", import.meta.url)));
const validate = new Ajv({ allErrors: true }).compile(schema);
let failed = 0;
for (const f of files) {
  let doc;
  try {
    doc = JSON.parse(readFileSync(f, "utf8"));
  } catch (e) {
    console.error("validate-trace: " + f + ": not JSON: " + e.message);
    failed++;
    continue;
  }
  if (!validate(doc)) {
    const first = validate.errors.slice(0, 5).map((e) => e.instancePath + " " + e.message).join("; ");
    console.error("validate-trace: " + f + ": " + validate.errors.length + " errors: " + first);
    failed++;
    continue;
  }
  const n = doc.traceEvents.length, phases = {};
  for (const e of doc.traceEvents) phases[e.ph] = (phases[e.ph] || 0) + 1;
  console.log("validate-trace: ok: " + f.split("/").pop() + " (" + n + " events: " + JSON.stringify(phases) + ")");
}
process.exit(failed ? 1 : 0);
