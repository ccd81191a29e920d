#!/usr/bin/env python3
"""Plug pem into a browser agent over MCP (stdio, newline-delimited JSON-RPC).

The loop every agent run follows:
  1. experience_query: what is known about this task on this site, and how far
     to trust it (tier P1 replay ... P5 nothing known);
  2. run the task with your agent, using that memory;
  3. experience_save: the run's trace (also when it failed), so the next run
     starts from it.

Here run.json, next to this script, stands in for the agent's run. Standard
library only. Usage:

  PEM_KNOWLEDGE_DIR=knowledge python3 mcp_agent.py [PEM_BINARY]

PEM_BINARY defaults to $PEM or "pem" on PATH; the tree must exist (pem init).
"""
import json
import os
import subprocess
import sys

URL = "https://github.com/pemdev/pem"
INTENT = "read the star count"
HERE = os.path.dirname(os.path.abspath(__file__))


class MCPClient:
    """A minimal MCP client: one JSON-RPC message per line on pem mcp's stdio."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 0

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("pem mcp closed stdout (see its stderr)")
            answer = json.loads(line)
            if answer.get("id") != self.next_id:
                continue  # a notification or log message: not our answer
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error']}")
            return answer["result"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def call_tool(self, name, arguments):
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        if result.get("isError"):
            raise RuntimeError(f"{name}: {text}")
        return json.loads(text)  # pem's tools answer JSON

    def _send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def close(self):
        self.proc.stdin.close()  # the server ends when stdin closes
        return self.proc.wait(timeout=30)


def main():
    pem = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PEM", "pem")
    client = MCPClient([pem, "mcp"])
    try:
        init = client.request("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pem-example-agent", "version": "1.0"},
        })
        client.notify("notifications/initialized")
        print(f"connected to {init['serverInfo']['name']} {init['serverInfo'].get('version', '')}")

        tools = [t["name"] for t in client.request("tools/list")["tools"]]
        print("tools:", ", ".join(sorted(tools)))
        for need in ("experience_query", "experience_save"):
            if need not in tools:
                raise RuntimeError(f"pem mcp does not offer {need}")

        # 1. Before the task: what does memory hold?
        before = client.call_tool("experience_query", {"url": URL, "intent": INTENT})
        print(f"before: tier {before['tier']}, {before['success_count']} success(es) on record")

        # 2. The agent runs the task (here: the sample trace).
        with open(os.path.join(HERE, "run.json"), encoding="utf-8") as f:
            trace = json.load(f)

        # 3. After the task: save the run, with a lesson learnt on the way.
        saved = client.call_tool("experience_save", {
            "url": URL,
            "intent": INTENT,
            "outcome": "success",
            "trace": trace,
            "facts": {"selectors": {"stars": "#repo-stars-counter-star"},
                      "interaction_hints": ["the star count is in the repository header"]},
        })
        if not saved.get("saved"):
            raise RuntimeError(f"experience_save did not save: {saved}")
        print(f"saved trace {saved['id']} ({saved['trace_path']}), facts merged: {saved['facts_merged']}")

        # The next run starts from what was saved.
        after = client.call_tool("experience_query", {"url": URL, "intent": INTENT})
        stars = after.get("primary_selectors", {}).get("stars")
        print(f"after: tier {after['tier']}, selector for stars: {stars}")
        if stars != "#repo-stars-counter-star":
            raise RuntimeError(f"the saved selector is not served: {after}")
    finally:
        code = client.close()
    if code != 0:
        raise RuntimeError(f"pem mcp exited {code}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - an example: say what failed, exit 1
        print(f"mcp_agent.py: {e}", file=sys.stderr)
        sys.exit(1)
