// Drives the delegation tools of `pem mcp --browser` with the official
// TypeScript MCP SDK, as a new user's client would: a client that supports
// elicitation (form) and asks for progress, a second one that does not
// support elicitation, consolidation between runs (pem consolidate), and a
// call the client aborts. Prints one JSON object with what it saw; the Go
// test (delegate_ts_test.go) asserts.
//
// usage: node delegate_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL CHECKS_TASK PULLS_TASK STARS_TASK
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, dir, repo, task, pulls, stars] = process.argv.slice(2);
if (!bin || !dir || !repo || !task || !pulls || !stars) {
  console.error("usage: node delegate_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL CHECKS_TASK PULLS_TASK STARS_TASK");
  process.exit(2);
}

const connect = async (name, elicitation) => {
  const transport = new StdioClientTransport({ command: bin, args: ["mcp", "--knowledge", dir, "--browser"], stderr: "inherit" });
  const client = new Client({ name, version: "1.0.0" }, { capabilities: elicitation ? { elicitation: {} } : {} });
  await client.connect(transport);
  return client;
};
const call = async (client, name, args, extra = {}) => {
  let progress = 0;
  const res = await client.callTool({ name, arguments: args }, undefined, {
    timeout: 120000, resetTimeoutOnProgress: true, onprogress: () => { progress++; }, ...extra,
  });
  return { ...res, progress };
};
const consolidate = () => execFileSync(bin, ["consolidate", "--knowledge", dir], { stdio: ["ignore", "ignore", "inherit"] });

const client = await connect("pem-delegate-tsclient", true);
let answer = "accept";
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return answer === "accept" ? { action: "accept", content: { approve: true } } : { action: "decline" };
});
const out = { tools: (await client.listTools()).tools.map((t) => t.name) };
const run = { task, url: repo };

out.bad = await call(client, "browser_agent_run", { task });
out.accepted = await call(client, "browser_agent_run", run); // planned (P5), approved
answer = "decline";
out.declined = await call(client, "browser_agent_run", run); // planned, refused
consolidate();
answer = "accept";
out.second = await call(client, "browser_agent_run", run); // a second session's success: P2 next
consolidate();
answer = "decline";
out.replayDeclined = await call(client, "browser_agent_run", run); // replayed (P2), refused
answer = "accept";
out.parallel = await call(client, "browser_agents_run", { tasks: [{ task: pulls, url: repo }, { task: stars, url: repo }] });

const ac = new AbortController();
try {
  await client.callTool({ name: "browser_agent_run", arguments: { task: stars, url: repo } }, undefined, {
    timeout: 120000, signal: ac.signal, onprogress: () => ac.abort("the user changed their mind"),
  });
  out.cancel = "returned";
} catch (e) {
  out.cancel = `${e?.name ?? "Error"}: ${e?.message ?? e}`;
}
out.after = await call(client, "experience_list", {});
out.asked = asked;
await client.close();

// A client that cannot be asked: the result names the step.
const plain = await connect("pem-delegate-tsclient-plain", false);
out.unsupported = await call(plain, "browser_agent_run", run);
await plain.close();
console.log(JSON.stringify(out));
