// deploy/check/validate.mjs - validates rendered Kubernetes manifests (multi-document YAML files given as
// arguments) twice: each object against the Kubernetes API schema of its apiVersion/kind (kubernetes-models'
// ajv validators: types, required fields, enums; prometheus-operator's and KEDA's resources from the same
// family's packages), then all of them through TypeScript in strict mode, where
// an object literal typed as its kind's interface fails on any unknown field (`spec.replica`). Prints one
// line per problem and "ok N objects" at the end; exits 1 on any problem. Run by deploy/scripts/check.sh
// from a folder holding node_modules (npm ci of deploy/check/package.json).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

const files = process.argv.slice(2);
if (!files.length) {
  console.error("usage: node validate.mjs FILE.yaml...");
  process.exit(2);
}
let problems = 0;
const objects = [];
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) {
      console.log(`${file}: YAML: ${doc.errors[0].message}`);
      problems++;
      continue;
    }
    const obj = doc.toJSON();
    if (!obj) continue;
    const where = `${file}: ${obj.kind ?? "?"}/${obj.metadata?.name ?? "?"}`;
    if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
      console.log(`${where}: no apiVersion or kind`);
      problems++;
      continue;
    }
    // Custom resources come from their operators' packages of the same family (same layout and validators).
    const crds = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator", "keda.sh": "@kubernetes-models/keda" };
    const pkg = crds[obj.apiVersion.split("/")[0]] ?? "kubernetes-models";
    const module = `${pkg}/${obj.apiVersion}/${obj.kind}`;
    let Model;
    try {
      Model = (await import(module))[obj.kind];
    } catch {
      console.log(`${where}: unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
      problems++;
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      console.log(`${where}: schema: ${e.message.split("\n").slice(0, 3).join(" ")}`);
      problems++;
      continue;
    }
    objects.push({ where, module, kind: obj.kind, obj });
  }
}

// Unknown fields: one TypeScript module typing every object literal as its kind's interface.
const dir = mkdtempSync(join(process.cwd(), ".tsc-"));      /* beside node_modules, for module resolution */
const lines = [], where = {};
objects.forEach((o, i) => {
  lines.push(`import type { I${o.kind} as T${i} } from "${o.module}";`);
  const body = JSON.stringify(o.obj, null, 1).split("\n");
  where[lines.length + 1] = o.where;          // the object's first line in the module (1-based)
  lines.push(`export const m${i}: T${i} = ${body[0]}`, ...body.slice(1), ";");
});
// each object starts at its own line; map a tsc line back to the object that contains it
const starts = Object.keys(where).map(Number).sort((a, b) => a - b);
writeFileSync(join(dir, "objects.ts"), lines.join("\n") + "\n");
writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
  compilerOptions: { strict: true, noEmit: true, skipLibCheck: true, module: "nodenext", moduleResolution: "nodenext",
                     types: [] },
  files: ["objects.ts"],
}));
try {
  execFileSync(resolve("node_modules/.bin/tsc"), ["-p", dir], { encoding: "utf8", stdio: "pipe" });
} catch (e) {
  for (const line of String(e.stdout).split("\n").filter((l) => /error TS/.test(l))) {
    const n = Number((line.match(/objects\.ts\((\d+),/) || [])[1]);
    const start = starts.filter((s) => s <= n).pop();
    console.log(`${where[start] ?? "?"}: fields: ${line.replace(/^.*error /, "")}`);
    problems++;
  }
  if (!problems) {
    console.log(`tsc failed: ${e.stdout || e.message}`);
    problems++;
  }
}
rmSync(dir, { recursive: true, force: true });
console.log(problems ? `${problems} problem(s)` : `ok ${objects.length} objects`);
process.exit(problems ? 1 : 0);
