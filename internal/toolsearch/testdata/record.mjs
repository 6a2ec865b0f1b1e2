// record.mjs starts each MCP server of servers.json once over stdio, asks
// for its tools (initialize, notifications/initialized, tools/list with
// every page) and writes catalog.json: the servers' names, packages,
// versions and licences, and their tools exactly as they listed them.
//
//   cd DIR && npm install --ignore-scripts PACKAGE@VERSION ...
//   node record.mjs DIR servers.json > catalog.json
//
// The servers need no network to list their tools; those that want an
// API key get a placeholder, which no request ever uses.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [dir, specFile] = process.argv.slice(2);
const specs = JSON.parse(readFileSync(specFile, "utf8"));

function record(spec) {
  return new Promise((resolve, reject) => {
    const pkg = JSON.parse(readFileSync(join(dir, "node_modules", spec.package, "package.json"), "utf8"));
    let bin = pkg.bin;
    if (typeof bin === "object") bin = bin[spec.bin ?? Object.keys(bin)[0]];
    const main = join(dir, "node_modules", spec.package, bin);
    const child = spawn(process.execPath, [main, ...(spec.args ?? [])], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(spec.env ?? {}) },
      stdio: ["pipe", "pipe", "ignore"],
    });
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(spec.name + ": no answer in 60s")); }, 60000);
    let buf = "", next = 1, tools = [], waiting = {};
    const send = (method, params) => {
      const id = next++;
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
      return new Promise((res) => { waiting[id] = res; });
    };
    child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        let msg; try { msg = JSON.parse(line); } catch { continue; }
        if (msg.id !== undefined && waiting[msg.id]) { waiting[msg.id](msg); delete waiting[msg.id]; }
      }
    });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(spec.name + ": exited with " + code)); });
    (async () => {
      const init = await send("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "mcpgate-record", version: "1" } });
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
      let cursor;
      do {
        const r = await send("tools/list", cursor ? { cursor } : {});
        if (r.error) throw new Error(spec.name + ": " + r.error.message);
        tools.push(...r.result.tools);
        cursor = r.result.nextCursor;
      } while (cursor);
      clearTimeout(timer);
      child.removeAllListeners("exit");
      child.kill("SIGKILL");
      resolve({ name: spec.name, package: spec.package, version: pkg.version, license: pkg.license ?? null,
        serverInfo: init.result?.serverInfo ?? null, tools });
    })().catch((e) => { clearTimeout(timer); child.kill("SIGKILL"); reject(e); });
  });
}

const out = [];
for (const spec of specs) {
  try { out.push(await record(spec)); }
  catch (e) { process.stderr.write("skipped " + e.message + "\n"); }
}
process.stdout.write(JSON.stringify({ servers: out }, null, 1) + "\n");
