# pem — Progressive Experience Memory for browser agents.
#
#   make demo    build pem and run it end to end on a temporary knowledge tree
#   make test    install what the tests need (fresh Debian), vet, gofmt, the whole suite
#   make build   bin/pem
#   make bench   the benchmarks
#   make simulate   the fleet simulation of docs/scale.md (minutes; not part of make test)
#   make bench-scale [SCALE=full]   the scale table of docs/performance.md (minutes; full: tens of minutes)
#   make release VERSION=v0.x.y   release archives and checksums in dist/
#
# Everything runs offline: no browser download (rod's is disabled), Debian's
# Chromium, the Go module proxy for modules.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

GO ?= go
MODULE := github.com/pemdev/pem
# urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown writers
# (pem uses neither): their Markdown parser's init cost ~0.6 ms of every
# pem process's start-up (docs/performance.md, start-up).
PEM_TAGS ?= urfave_cli_no_docs
CHROMIUM ?= /usr/lib/chromium/chromium
CHROMIUM_SHELL ?= /usr/lib/chromium/chromium-headless-shell

# go-rod must never fetch a browser or read flags of its own.
export DISABLE_ROD_FLAG := 1

# Packages with concurrency run under the race detector; the others run once,
# plain (running everything twice is too slow on 2 cores). Paths relative to
# the module; packages that do not exist yet are skipped.
RACE_PKGS ?= engine engine/mcp engine/web store store/gitrepo cmd/pem consolidate agent agent/mcpbrowser

# The demo: the embedded demo site served on 127.0.0.1, every task cold, then
# warm rounds until the knowledge is verified and replays at P1 (round 6).
DEMO_ROUNDS ?= 6

.PHONY: all test deps test-deps chromium vet fmt-check go-test build demo bench bench-scale heldout simulate release cross clean

all: test

## test: everything CI runs (.ci/run calls this)
test: deps vet fmt-check go-test

## deps: what the tests need on a fresh Debian machine: gcc (the race
## detector), shellcheck (the workflow lint), the Flask and Jinja
## documentation (real pages nobody here wrote, served by the list and
## bench tests) and Chromium
deps: test-deps chromium

test-deps:
	@if ! command -v gcc >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y gcc libc6-dev; \
	  else echo "make: gcc is missing (the race detector needs cgo): run 'sudo apt-get install -y gcc libc6-dev'" >&2; exit 1; fi; \
	fi
	@if ! command -v shellcheck >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y shellcheck; \
	  else echo "make: shellcheck is missing (the workflow lint runs it): run 'sudo apt-get install -y shellcheck'" >&2; exit 1; fi; \
	fi
	@if [ ! -f /usr/share/doc/python-flask-doc/html/index.html ] || [ ! -f /usr/share/doc/python-jinja2-doc/html/index.html ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y python-flask-doc python-jinja2-doc; \
	  else echo "make: the Flask and Jinja documentation are missing (agent/rod and agent/bench serve them as real sites): run 'sudo apt-get install -y python-flask-doc python-jinja2-doc'" >&2; exit 1; fi; \
	fi

## chromium: the browser, all the demo needs besides Go: Debian's chromium, and beside it its
## headless shell (chromium-headless-shell), which pem prefers for headless runs (docs/agent.md)
chromium:
	@if [ -z "$${PEM_CHROME:-}" ] && [ ! -x "$(CHROMIUM)" ] && \
	    [ -z "$$(for b in chromium chromium-browser google-chrome google-chrome-stable chrome; do command -v $$b || true; done)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium chromium-headless-shell; \
	  else echo "make: Chromium is missing ($(CHROMIUM)): run 'sudo apt-get install -y chromium chromium-headless-shell', or set PEM_CHROME to a Chromium binary" >&2; exit 1; fi; \
	fi
	@if [ -z "$${PEM_CHROME:-}" ] && [ ! -x "$(CHROMIUM_SHELL)" ] && command -v apt-get >/dev/null && \
	    [ -z "$$(for b in chromium-headless-shell chrome-headless-shell; do command -v $$b || true; done)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium-headless-shell; \
	  else echo "make: Chromium's headless shell is missing ($(CHROMIUM_SHELL)); headless runs use the slower full Chromium until you run 'sudo apt-get install -y chromium-headless-shell'" >&2; fi; \
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

# Static, as the release builds it (CGO_ENABLED=0): no dynamic loader at
# start-up, ~1.3 ms less CPU per process (docs/performance.md, Start-up).
build:
	CGO_ENABLED=0 $(GO) build -tags "$(PEM_TAGS)" -o bin/pem ./cmd/pem

## demo: pem's main job end to end on a temporary tree (needs only Chromium: installs it when root; no gcc, no shellcheck)
demo: chromium build
	./bin/pem demo --rounds $(DEMO_ROUNDS)

## bench: Go benchmarks (then bin/pem bench once it exists)
## bench-scale: generates trees in a temporary directory (1k/10k/30k traces in one domain, a
## 1,000-domain tree, one entry with 3,000 evidence items, a 1,090-commit history), builds pem
## there and prints each row of the scale table with its baseline measured in the same run.
## SCALE=small (default, a few minutes) or SCALE=full (the issue's sizes, tens of minutes);
## BENCH_SCALE_DIR=DIR keeps the trees for the next run. Not part of make test.
SCALE ?= small
bench-scale:
	$(GO) run ./store/treegen/benchscale -scale $(SCALE)

## heldout: the agent on documentation sites it was not developed on (Debian's
## python-werkzeug-doc and python-requests-doc, installed when root)
heldout: chromium
	@if [ ! -f /usr/share/doc/python-werkzeug-doc/html/index.html ] || [ ! -f /usr/share/doc/python-requests-doc/html/index.html ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y python-werkzeug-doc python-requests-doc; \
	  else echo "make: run 'sudo apt-get install -y python-werkzeug-doc python-requests-doc'" >&2; exit 1; fi; \
	fi
	$(GO) test -tags heldout -run TestHeldOut -v ./agent/

bench: build
	$(GO) test -run '^$$' -bench . ./...
	@if ./bin/pem bench --help >/dev/null 2>&1; then ./bin/pem bench; fi

## simulate: simulated days of fleet use, printed per week (.git, packs, clones,
## consolidation CPU and memory) with the one-year extrapolation (docs/scale.md).
## The default, 7 weeks at the issue's 1,200 traces a day, is the shortest run that shows the
## steady state (traces expire from week 5: two weeks of it); ~15-25 minutes on 2 cores.
## docs/scale.md records the runs (SIMULATE_FLAGS="-days 63" for 9 weeks).
SIMULATE_FLAGS ?= -days 49 -traces 1200
simulate: build
	$(GO) run ./store/treegen/simulate -pem bin/pem $(SIMULATE_FLAGS)

## release: static binaries for every platform, archived with SHA-256 checksums, in dist/
## (PLATFORMS="linux/amd64" for one); .github/workflows/release.yml runs it on a tag
release:
	@if [ -z "$(VERSION)" ]; then echo "make: give the version: make release VERSION=v0.1.0" >&2; exit 2; fi
	PEM_TAGS="$(PEM_TAGS)" .github/scripts/release.sh $(VERSION) $(PLATFORMS)

## cross: builds pem for the release's other platforms (darwin, windows), discarding the
## binaries, and vets every package with its tests for them — a platform-specific file missing
## its counterpart fails here, not at release time. Not part of `make test` (a cold cross build
## takes minutes); ci.yml runs it beside.
cross:
	@for p in darwin/amd64 darwin/arm64 windows/amd64; do \
	  echo "go build ./cmd/pem for $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -tags "$(PEM_TAGS)" -o /dev/null ./cmd/pem || exit 1; \
	done
	@for os in darwin windows; do \
	  echo "go vet ./... (tests included) for $$os"; \
	  CGO_ENABLED=0 GOOS=$$os $(GO) vet ./... || exit 1; \
	done

clean:
	rm -rf bin dist
