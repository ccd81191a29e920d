#!/usr/bin/env bash
# Cuts a Markdown report (pem diff --format markdown, the deep-learn report)
# to a pull request body GitHub accepts: it refuses bodies over 65,536
# characters, and a 300-entry consolidation's diff is about 100 KB. The body
# keeps whole lines from the top and ends with a note saying where the full
# report is (the workflow uploads it as an artifact).
#
#   .github/scripts/pem-pr-body.sh FULL BODY [WHERE]
#
# FULL is the report, BODY the file to write, WHERE says where the full report
# is (default: the artifact of this workflow run). MAX_BODY_BYTES (default
# 60000) is the cap, in bytes, which is never fewer than characters.
set -euo pipefail

full=${1:?usage: pem-pr-body.sh FULL BODY [WHERE]}
body=${2:?usage: pem-pr-body.sh FULL BODY [WHERE]}
run_url="${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY:-}/actions/runs/${GITHUB_RUN_ID:-}"
where=${3:-"the artifact of [this workflow run]($run_url)"}
max=${MAX_BODY_BYTES:-60000}

size=$(wc -c <"$full")
if [ "$size" -le "$max" ]; then
  cp "$full" "$body"
  exit 0
fi
lines=$(wc -l <"$full")
note_max=400 # the note below, with room for a long WHERE
LC_ALL=C awk -v max=$((max - note_max)) '
  { n += length($0) + 1; if (n > max) exit; print; kept++ }
  END { print kept > "/dev/stderr" }
' "$full" >"$body" 2>"$body.kept"
kept=$(cat "$body.kept")
rm -f "$body.kept"
printf '\n---\n\n**The report is cut here** (%d of %d lines, %d bytes in all; GitHub takes at most 65,536 characters): the full report is %s.\n' \
  "$kept" "$lines" "$size" "${where:0:300}" >>"$body"
