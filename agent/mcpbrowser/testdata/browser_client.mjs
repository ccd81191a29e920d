// Drives `pem mcp --browser` with the official TypeScript MCP SDK, as a new
// user's client would: connect over stdio and browse the demo site through
// pem's browser tools. Prints one JSON object with what it saw; the Go test
// (tsclient_test.go) asserts.
//
// usage: node browser_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL first|second
//   first:  navigate, list elements, malformed calls, a click the approval
//           policy stops (this client cannot ask its user), click, read, done.
//   second: a client that can ask its user (elicitation; it says yes):
//           navigate (memory expected), the sensitive click, then leave
//           without browser_done.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, dir, repo, mode] = process.argv.slice(2);
if (!bin || !dir || !repo || !mode) {
  console.error("usage: node browser_client.mjs PEM_BINARY KNOWLEDGE_DIR REPO_URL first|second");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--knowledge", dir, "--browser"],
  stderr: "inherit",
});
const client = new Client(
  { name: "pem-browser-tsclient", version: "1.0.0" },
  mode === "second" ? { capabilities: { elicitation: {} } } : {},
);
const asked = [];
if (mode === "second") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return { action: "accept", content: { approve: true } };
  });
}
await client.connect(transport);
const intent = "count open pull requests";
const out = { tools: (await client.listTools()).tools.map((t) => t.name) };
const call = (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });

out.navigate = await call("browser_navigate", { url: repo, intent });
if (mode === "first") {
  out.elements = await call("browser_get_elements", {});
  out.bad = await call("browser_get_elements", { limit: "many" });
  out.unknownArg = await call("browser_click", { selector: "#pull-requests-tab", button: "left" });
  out.sensitive = await call("browser_click", { selector: "#actions-tab" });
  out.click = await call("browser_click", { selector: "#pull-requests-tab" });
  out.read = await call("browser_extract", { selector: "#pull-requests-repo-tab-count" });
  const answer = (out.read.structuredContent?.extracted_content ?? "").trim();
  out.done = await call("browser_done", { answer, outcome: "success" });
} else {
  out.sensitive = await call("browser_click", { selector: "#actions-tab" });
  out.asked = asked;
}
console.log(JSON.stringify(out));
await client.close();
