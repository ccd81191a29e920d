#!/usr/bin/env python3
"""Plug pem into a browser agent through its CLI (subprocess, JSON on stdout).

The same loop as mcp_agent.py: query memory before the task, give the agent the
prompt-ready "## Memory" section, save the run afterwards, and consolidate.
Exit codes are documented (docs/cli.md): 4 is "not found", 9 to 13 are the
environment's (disk, permissions, git, Chromium, the remote), each with what to
do on stderr. run.json, next to this script, stands in for the agent's run.
Standard library only. Usage:

  PEM_KNOWLEDGE_DIR=knowledge python3 cli_agent.py [PEM_BINARY]
"""
import json
import os
import subprocess
import sys

URL = "https://github.com/pemdev/pem"
INTENT = "read the star count"
HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_NOT_FOUND = 4


class PemError(RuntimeError):
    def __init__(self, args, code, stderr):
        super().__init__(f"{' '.join(args)} exited {code}: {stderr.strip()}")
        self.code = code


def pem(binary, *args, want_json=True):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise PemError(["pem", *args], p.returncode, p.stderr)
    return json.loads(p.stdout) if want_json else p.stdout


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PEM", "pem")

    # 1. Before the task: the tier says how far to trust memory; the memory
    #    section is what goes into the agent's prompt.
    q = pem(binary, "experience", "query", URL, "--intent", INTENT)
    print(f"before: tier {q['tier']}")
    memory = pem(binary, "memory", URL, "--intent", INTENT, want_json=False)
    print(f"memory for the prompt: {len(memory)} characters")

    # 2. The agent runs the task (here: the sample trace) ...
    trace_file = os.path.join(HERE, "run.json")

    # 3. ... and the run is saved, with what it learnt.
    facts = {"selectors": {"stars": "#repo-stars-counter-star"},
             "known_blockers": ["a cookie banner may cover the header"]}
    saved = pem(binary, "experience", "save", URL, "@" + trace_file, "--intent", INTENT,
                "--facts", json.dumps(facts))
    if not saved.get("saved"):
        raise RuntimeError(f"experience save did not save: {saved}")
    print(f"saved trace {saved['id']}, tier now {saved['retrieval_tier']}")

    # Fold the new evidence into experience and facts (a cron job does this too).
    pem(binary, "consolidate", want_json=False)

    after = pem(binary, "experience", "query", URL, "--intent", INTENT)
    selectors = after.get("primary_selectors", {})
    print(f"after: tier {after['tier']}, selectors: {selectors}, blockers: {after['known_blockers']}")
    if "#repo-stars-counter-star" not in selectors.values():
        raise RuntimeError(f"the saved selector is not served: {after}")

    # Exit codes tell what went wrong: 4 is "not found".
    try:
        pem(binary, "log", "nothing.example/foo", want_json=False)
        raise RuntimeError("pem log of an unknown entry succeeded")
    except PemError as e:
        if e.code != EXIT_NOT_FOUND:
            raise
        print("unknown entry: exit 4 (not found), as documented")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - an example: say what failed, exit 1
        print(f"cli_agent.py: {e}", file=sys.stderr)
        sys.exit(1)
