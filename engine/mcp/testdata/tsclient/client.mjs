// Drives `pem mcp` with the official TypeScript MCP SDK, as a new user's
// client would: connect over stdio, list the tools, save a run with
// camelCase arguments and a trace given as a JSON string, query it back,
// deep-learn it when the tool is listed, send a bad call and an unknown tool. Prints one JSON object with what it saw; the Go test asserts.
//
// usage: node client.mjs PEM_BINARY KNOWLEDGE_DIR
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, dir] = process.argv.slice(2);
if (!bin || !dir) {
  console.error("usage: node client.mjs PEM_BINARY KNOWLEDGE_DIR");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--knowledge", dir],
  stderr: "inherit",
});
const client = new Client({ name: "pem-tsclient", version: "1.0.0" });
await client.connect(transport);

const url = "https://github.com/pemdev/pem";
const intent = "count open issues";
const tools = await client.listTools();
const trace = {
  steps: [
    { action: "navigate", url },
    { action: "click", selector: "#issues-tab" },
    { action: "get_text", selector: "#issues-tab .Counter", result: "42" },
  ],
  answer: "42",
  durationMs: 1234,
};
const save = await client.callTool({
  name: "experience_save",
  arguments: {
    url,
    intent,
    outcome: "success",
    taskType: "extraction",
    trace: JSON.stringify(trace),
    facts: { selectors: { issue_count: "#issues-tab .Counter" }, interactionHints: ["the counter sits in the tab"] },
  },
});
const query = await client.callTool({ name: "experience_query", arguments: { url, intent } });
const memory = await client.callTool({ name: "experience_memory", arguments: { url, intent, maxChars: 1500 } });
const deep = tools.tools.some((t) => t.name === "experience_deep_learn")
  ? await client.callTool({ name: "experience_deep_learn", arguments: { url, intent } })
  : null;
const bad = await client.callTool({ name: "experience_save", arguments: { url: "/no/host", intent } });
let unknownTool = null;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
} catch (e) {
  unknownTool = { code: e.code ?? null, message: String(e.message) };
}

console.log(
  JSON.stringify({
    server: client.getServerVersion(),
    instructions: client.getInstructions() ?? "",
    tools: tools.tools.map((t) => t.name),
    save,
    query,
    memory,
    deep,
    bad,
    unknownTool,
  }),
);
await client.close();
