#!/usr/bin/env python3
"""Plug pem into a browser agent over HTTP (pem serve --http), without MCP.

The same loop as cli_agent.py and mcp_agent.py, for an agent in any language
(a Python browser-use agent): query memory before the task, put the
"## Memory" section in the agent's prompt, save the run after it, and record a
judgement of it. Errors are JSON {"error", "code", "status"} with the CLI's
exit codes (docs/cli.md). run.json, next to this script, stands in for the
agent's run. The script starts the server itself; with a running one, point
PEM_URL at it (and PEM_SERVE_TOKEN at its token, for a non-loopback address).
Standard library only. Usage:

  PEM_KNOWLEDGE_DIR=knowledge python3 http_agent.py [PEM_BINARY]
"""
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

URL = "https://github.com/pemdev/pem"
INTENT = "read the star count"
HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_NOT_FOUND = 4


class PemError(RuntimeError):
    def __init__(self, path, body):
        super().__init__(f"{path}: {body.get('status')} (exit code {body.get('code')}): {body.get('error')}")
        self.code = body.get("code")


def call(base, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="GET" if body is None else "POST")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        raise PemError(path, json.load(e)) from None


def start(binary):
    """pem serve --http on a free loopback port, writes enabled."""
    p = subprocess.Popen([binary, "serve", "--http", "127.0.0.1:0", "--write"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if line.startswith("knowledge browser: "):
            return p, line.split(": ", 1)[1].strip().rstrip("/")
    raise RuntimeError(f"pem serve printed no address (exit {p.wait()})")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PEM", "pem")
    server, base = None, os.environ.get("PEM_URL", "").rstrip("/")
    if not base:
        server, base = start(binary)
    token = os.environ.get("PEM_SERVE_TOKEN")
    try:
        q = urllib.parse.urlencode({"url": URL, "intent": INTENT})
        # 1. Before the task: how far to trust memory, and the prompt section.
        recall = call(base, "/api/query?" + q, token=token)
        print(f"before: tier {recall['tier']}")
        memory = call(base, "/api/memory?" + q, token=token)["memory"]
        print(f"memory for the prompt: {len(memory)} characters")

        # 2. The agent runs the task (here: the sample trace), 3. and saves it.
        with open(os.path.join(HERE, "run.json")) as f:
            trace = json.load(f)
        saved = call(base, "/api/traces", {
            "url": URL, "intent": INTENT, "trace": trace,
            "facts": {"selectors": {"stars": "#repo-stars-counter-star"}},
        }, token=token)
        if not saved.get("saved"):
            raise RuntimeError(f"the save did not save: {saved}")
        print(f"saved trace {saved['id']}, tier now {saved['retrieval_tier']}")

        # 4. Someone checked the answer: a verdict on the run.
        v = call(base, "/api/feedback", {"trace": saved["id"], "verdict": "right", "judge": "http_agent.py"}, token=token)
        print(f"verdict {v['verdict']} recorded: {v['recorded']}")

        after = call(base, "/api/query?" + q, token=token)
        if "#repo-stars-counter-star" not in after.get("primary_selectors", {}).values():
            raise RuntimeError(f"the saved selector is not served: {after}")
        print(f"after: tier {after['tier']}, {after['success_count']} success(es)")

        # Errors carry the CLI's exit codes: 4 is "not found".
        try:
            call(base, "/api/entries/nothing.example/foo", token=token)
            raise RuntimeError("an unknown entry was found")
        except PemError as e:
            if e.code != EXIT_NOT_FOUND:
                raise
            print("unknown entry: code 4 (not found), as documented")
    finally:
        if server:
            server.send_signal(signal.SIGTERM)  # a graceful stop
            if server.wait(timeout=30) != 0:
                raise RuntimeError(f"pem serve exited {server.returncode} on SIGTERM")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - an example: say what failed, exit 1
        print(f"http_agent.py: {e}", file=sys.stderr)
        sys.exit(1)
