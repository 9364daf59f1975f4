// deploy/check/podspec.mjs - what a rendered manifest tells a container to run, for deploy/scripts/pods.sh to
// start the same container with podman (the arguments and environment are read, not retyped):
//   node podspec.mjs FILE.yaml pod KIND NAME POD_IP  -> "arg VALUE" and "env KEY=VALUE" lines, the first
//        container's args, its envFrom ConfigMaps (from the same file), env values, fieldRef status.podIP,
//        and $(VAR) references expanded as the kubelet does
//   node podspec.mjs FILE.yaml secret NAME KEY       -> the Secret's value for KEY (decoded)
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const [file, what, ...rest] = process.argv.slice(2);
const objs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJSON()).filter(Boolean);
const find = (kind, name) => {
  const o = objs.find((x) => x.kind === kind && x.metadata?.name === name);
  if (!o) throw new Error(`${file}: no ${kind} ${name}`);
  return o;
};
if (what === "secret") {
  const [name, key] = rest;
  const s = find("Secret", name);
  const v = s.data?.[key] !== undefined ? Buffer.from(s.data[key], "base64").toString() : s.stringData?.[key];
  if (v === undefined) throw new Error(`Secret ${name} has no ${key}`);
  process.stdout.write(v);
} else if (what === "pod") {
  const [kind, name, podIP] = rest;
  const c = find(kind, name).spec.template.spec.containers[0];
  const env = {};
  for (const from of c.envFrom ?? [])
    if (from.configMapRef) Object.assign(env, find("ConfigMap", from.configMapRef.name).data ?? {});
  const expand = (s) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => (v in env ? env[v] : m));
  for (const e of c.env ?? []) {
    if (e.valueFrom?.fieldRef?.fieldPath === "status.podIP") env[e.name] = podIP;
    else if (e.valueFrom) throw new Error(`${kind} ${name}: env ${e.name}: valueFrom not supported here`);
    else env[e.name] = expand(e.value ?? "");
  }
  for (const a of c.args ?? []) console.log(`arg ${expand(a)}`);
  for (const [k, v] of Object.entries(env)) console.log(`env ${k}=${v}`);
} else {
  console.error("usage: node podspec.mjs FILE.yaml pod KIND NAME POD_IP | secret NAME KEY");
  process.exit(2);
}
