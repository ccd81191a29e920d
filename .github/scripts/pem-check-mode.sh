#!/usr/bin/env bash
# Chooses how pem-check.yml checks a pull request, from who could have made
# it and what it changes — never from its branch name, which anyone opening a
# pull request from a fork chooses.
#
#   .github/scripts/pem-check-mode.sh BASE_REF
#
# Prints "pr" (pem check --pr: a contribution, which may add traces and edit
# unverified facts only) or "consolidation" (pem check: everything but the
# contribution rules), and a line on stderr saying why. "consolidation" only
# when the head branch lives in the base repository itself (only people and
# workflows with write access push there) and the change does what only a
# consolidation does: rewrite experience/ (a tree from before refs/pem/state)
# or a site entry (facts/<domain>/_site.yaml), or remove traces (expired, or
# moved to refs/pem/state).
# Everything else, every fork included, gets "pr".
#
# Environment: BASE_REPO and HEAD_REPO (owner/name of the pull request's base
# and head repositories), KNOWLEDGE_DIR (the tree, "." for the repository
# itself). Run in a checkout of the pull request with the base branch
# fetched as origin/BASE_REF.
set -euo pipefail

base_ref=${1:?usage: pem-check-mode.sh BASE_REF}
base_repo=${BASE_REPO:?BASE_REPO is not set}
head_repo=${HEAD_REPO:-}
kdir=${KNOWLEDGE_DIR:-.}

if [ "$head_repo" != "$base_repo" ]; then
  echo "pem-check-mode: the head repository ${head_repo:-(deleted)} is not $base_repo: a contribution" >&2
  echo pr
  exit 0
fi
prefix=""
if [ "$kdir" != "." ]; then
  prefix="${kdir%/}/"
fi
derived=0
while IFS=$'\t' read -r status path rest; do
  [ -n "${rest:-}" ] && path=$rest # renames and copies: the new path
  case $path in
    "$prefix"experience/*) derived=1 ;;
    "$prefix"facts/*/_site.yaml) derived=1 ;; # site entries: written only by consolidation
    "$prefix"traces/*) case $status in D* | M* | R*) derived=1 ;; esac ;;
  esac
done < <(git diff --name-status --no-renames "origin/$base_ref...HEAD" -- "$kdir")
if [ "$derived" = 1 ]; then
  echo "pem-check-mode: a branch of $base_repo that rewrites experience/ or a site entry, or removes traces: a consolidation" >&2
  echo consolidation
else
  echo "pem-check-mode: a branch of $base_repo that adds traces or edits facts only: a contribution" >&2
  echo pr
fi
