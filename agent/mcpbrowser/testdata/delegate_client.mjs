// Drives the delegation tools of `pem mcp --browser` with the official
// TypeScript MCP SDK, as a new user's client would: a client that supports
// elicitation (form), asks for progress, and cancels a call. Prints one JSON
// object with what it saw; the Go test (delegate_ts_test.go) asserts.
//
// usage: node delegate_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL TASK
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, dir, repo, task] = process.argv.slice(2);
if (!bin || !dir || !repo || !task) {
  console.error("usage: node delegate_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL TASK");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--knowledge", dir, "--browser"],
  stderr: "inherit",
});
const client = new Client({ name: "pem-delegate-tsclient", version: "1.0.0" }, { capabilities: { elicitation: {} } });
let answer = "accept";
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return answer === "accept" ? { action: "accept", content: { approve: true } } : { action: "decline" };
});
await client.connect(transport);
const out = { tools: (await client.listTools()).tools.map((t) => t.name) };
const call = async (name, args, extra = {}) => {
  let progress = 0;
  const res = await client.callTool({ name, arguments: args }, undefined, {
    timeout: 120000, resetTimeoutOnProgress: true, onprogress: () => { progress++; }, ...extra,
  });
  return { ...res, progress };
};

out.bad = await call("browser_agent_run", { task });
out.accepted = await call("browser_agent_run", { task, url: repo });
answer = "decline";
out.declined = await call("browser_agent_run", { task, url: repo });

const ac = new AbortController();
try {
  await client.callTool({ name: "browser_agent_run", arguments: { task, url: repo } }, undefined, {
    timeout: 120000, signal: ac.signal, onprogress: () => ac.abort("the user changed their mind"),
  });
  out.cancel = "returned";
} catch (e) {
  out.cancel = `${e?.name ?? "Error"}: ${e?.message ?? e}`;
}
out.after = await call("experience_list", {});
out.asked = asked;
console.log(JSON.stringify(out));
await client.close();
