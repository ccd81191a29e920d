# pem — Progressive Experience Memory for browser agents.
#
#   make demo    build pem and run it end to end on a temporary knowledge tree
#   make test    install what the tests need (fresh Debian), vet, gofmt, the whole suite
#   make build   bin/pem
#   make bench   the benchmarks
#
# Everything runs offline: no browser download (rod's is disabled), Debian's
# Chromium, the Go module proxy for modules.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

GO ?= go
MODULE := github.com/pemdev/pem
CHROMIUM ?= /usr/lib/chromium/chromium

# go-rod must never fetch a browser or read flags of its own.
export DISABLE_ROD_FLAG := 1

# Packages with concurrency run under the race detector; the others run once,
# plain (running everything twice is too slow on 2 cores). Paths relative to
# the module; packages that do not exist yet are skipped.
RACE_PKGS ?= engine engine/mcp store cmd/pem consolidate agent

# The demo. Until `pem demo` exists it is the inline script of demo-traces;
# then this line becomes: DEMO = bin/pem demo
DEMO = $(MAKE) --no-print-directory demo-traces

.PHONY: all test deps vet fmt-check go-test build demo demo-traces bench clean

all: test

## test: everything CI runs (.ci/run calls this)
test: deps vet fmt-check go-test

## deps: what the tests need on a fresh Debian machine
deps:
	@if ! command -v gcc >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y gcc libc6-dev; \
	  else echo "make: gcc is missing (the race detector needs cgo): run 'sudo apt-get install -y gcc libc6-dev'" >&2; exit 1; fi; \
	fi
	@if [ -z "$${PEM_CHROME:-}" ] && [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium; \
	  else echo "make: Chromium is missing ($(CHROMIUM)): run 'sudo apt-get install -y chromium', or set PEM_CHROME to a Chromium binary" >&2; exit 1; fi; \
	fi

vet:
	$(GO) vet ./...

## fmt-check: fails listing the files gofmt would change
fmt-check:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' -not -path './tmp/*' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt would change these files (run gofmt -w on them):" >&2; echo "$$files" >&2; exit 1; fi

## go-test: the race packages with -race, the rest plain; fuzz seed corpora run as ordinary tests
go-test:
	@pkgs=$$($(GO) list ./...); race=""; plain=""; \
	for p in $$pkgs; do \
	  rel=$${p#$(MODULE)}; rel=$${rel#/}; \
	  if [[ " $(RACE_PKGS) " == *" $$rel "* ]]; then race+=" $$p"; else plain+=" $$p"; fi; \
	done; \
	if [ -n "$$race" ]; then echo "go test -race$$race"; $(GO) test -race $$race; fi; \
	if [ -n "$$plain" ]; then echo "go test$$plain"; $(GO) test $$plain; fi

build:
	$(GO) build -o bin/pem ./cmd/pem

demo: build
	@$(DEMO)

## bench: Go benchmarks (then bin/pem bench once it exists)
bench: build
	$(GO) test -run '^$$' -bench . ./...
	@if ./bin/pem bench --help >/dev/null 2>&1; then ./bin/pem bench; fi

clean:
	rm -rf bin

# --- the inline demo: five runs of one GitHub-like task, saved, queried, rendered.

define DEMO_OK
{"task": "How many stars does pemdev/pem have?", "task_type": "extract",
 "steps": [
   {"action": "navigate", "url": "https://github.com/pemdev/pem", "ok": true, "duration_ms": 840},
   {"action": "click", "selector": "button.js-cookie-consent-accept", "ok": true, "duration_ms": 120},
   {"action": "get_text", "selector": "#repo-stars-counter-star", "result": "1.2k", "ok": true, "duration_ms": 35}],
 "outcome": "success", "answer": "1.2k stars",
 "final_page_url": "https://github.com/pemdev/pem", "final_page_title": "pemdev/pem: Progressive Experience Memory",
 "duration_ms": 1900}
endef
export DEMO_OK

define DEMO_FAIL
{"task": "How many stars does pemdev/pem have?", "task_type": "extract",
 "steps": [
   {"action": "navigate", "url": "https://github.com/pemdev/pem", "ok": true, "duration_ms": 910},
   {"action": "get_text", "selector": "span.Counter.js-social-count", "ok": false,
    "error": "no element matches span.Counter.js-social-count", "error_kind": "no_element", "duration_ms": 5000}],
 "outcome": "failure", "error_message": "the star counter was not found", "duration_ms": 6100}
endef
export DEMO_FAIL

define DEMO_FACTS
{"selectors": {"stars": {"primary": "#repo-stars-counter-star", "fallbacks": ["a[href$$='/stargazers'] .Counter"]}},
 "interaction_hints": ["accept the cookie banner first: it covers the counter"],
 "anti_patterns": ["span.Counter.js-social-count (old layout)"],
 "extraction_query": "text of #repo-stars-counter-star"}
endef
export DEMO_FACTS

demo-traces:
	@[ -x bin/pem ] || $(MAKE) --no-print-directory build; \
	tree=$$(mktemp -d); trap 'rm -rf "$$tree"' EXIT; \
	pem() { ./bin/pem --knowledge "$$tree/knowledge" "$$@"; }; \
	url=https://github.com/pemdev/pem; intent="read the star count of a repository"; \
	echo "== pem init"; pem init "$$tree/knowledge"; \
	echo; echo "== pem experience save (x5: 3 successes in two sessions, 1 failure, 1 success with a facts patch)"; \
	pem experience save "$$url" "$$DEMO_OK" --intent "$$intent" --session alice-1 | grep -E '"(saved|domain|outcome|confidence|retrieval_tier|trace_path)"' | tr -s ' ' | paste -sd' '; \
	pem experience save "$$url" "$$DEMO_OK" --intent "$$intent" --session alice-1 | grep -E '"(confidence|retrieval_tier)"' | tr -s ' ' | paste -sd' '; \
	pem experience save "$$url" "$$DEMO_FAIL" --intent "$$intent" --session bob-1 | grep -E '"(outcome|failure_category|confidence|retrieval_tier)"' | tr -s ' ' | paste -sd' '; \
	pem experience save "$$url" "$$DEMO_OK" --intent "$$intent" --session bob-2 | grep -E '"(confidence|retrieval_tier)"' | tr -s ' ' | paste -sd' '; \
	pem experience save "$$url" "$$DEMO_OK" --intent "$$intent" --session carol-1 --facts "$$DEMO_FACTS" | grep -E '"(confidence|retrieval_tier|facts_merged|facts_message)"' | tr -s ' ' | paste -sd' '; \
	echo; echo "== pem experience query $$url --intent \"what is the star count\"   (matched by word overlap)"; \
	pem experience query "$$url" --intent "what is the star count"; \
	echo; echo "== pem memory $$url --intent \"$$intent\""; \
	pem memory "$$url" --intent "$$intent"; \
	echo; echo "== pem memory https://gitlab.com/pemdev/pem (another domain: nothing known, empty output)"; \
	pem memory https://gitlab.com/pemdev/pem --intent "$$intent"; \
	echo; echo "== pem experience list"; \
	pem experience list; \
	echo; echo "== the tree, as plain files (cat them; git shows the traces as new files to commit)"; \
	(cd "$$tree/knowledge" && find . -path ./.git -prune -o -type f -print | sort); \
	echo; echo "== cat facts/github.com/*.yaml   (the reviewed knowledge; pem consolidate keeps it up to date)"; \
	cat "$$tree"/knowledge/facts/github.com/*.yaml
