#!/usr/bin/env bash
# Builds pem's release archives into dist/: a static binary (CGO_ENABLED=0,
# -trimpath) per platform, packed with the README as
# pem_<version>_<os>_<arch>.tar.gz (.zip for Windows), and
# pem_<version>_checksums.txt with their SHA-256 sums (sha256sum -c reads it).
#
#   .github/scripts/release.sh VERSION [GOOS/GOARCH ...]
#
# VERSION is the tag (v0.3.0); the platforms default to linux and darwin on
# amd64 and arm64, and windows/amd64. `make release VERSION=v0.3.0` runs it,
# and so does .github/workflows/release.yml for every pushed v* tag. The
# binary reports VERSION and the commit it was built from (pem --version).
# Environment: DIST (default <repo>/dist), GO (default go), PEM_TAGS (the build
# tags, default urfave_cli_no_docs: the Makefile's, the same as `make build`).
set -euo pipefail

usage="usage: $0 VERSION [GOOS/GOARCH ...] (VERSION like v0.3.0)"
version=${1:?$usage}
shift
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: $version is not a version: give the tag, like v0.3.0 ($usage)" >&2
  exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
dist=${DIST:-$root/dist}
go=${GO:-go}
tags=${PEM_TAGS-urfave_cli_no_docs}
v=${version#v}

# The commit, its time and whether the tree has uncommitted changes: the go
# command records them itself in a plain clone, but not in a git worktree or
# with -buildvcs=false, so they are passed as well (version.go prefers the
# build info's).
revision="" rtime="" modified="" epoch=0
if git -C "$root" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
  revision=$(git -C "$root" rev-parse HEAD)
  rtime=$(TZ=UTC git -C "$root" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)
  epoch=$(git -C "$root" log -1 --format=%ct HEAD)
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
    modified=true
  fi
fi
ldflags="-s -w -buildid= -X main.version=$version -X main.revision=$revision -X main.revisionTime=$rtime -X main.modified=$modified"

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum -- "$@"; else shasum -a 256 -- "$@"; fi
}

# Archives with fixed owners, order and times, so a rebuild of the same
# commit gives the same bytes (GNU tar; other tars get the plain form).
pack_tar() { # dir name out
  if tar --version 2>/dev/null | grep -q 'GNU tar'; then
    tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$1" -cf - "$2" | gzip -9n >"$3"
  else
    tar -C "$1" -cf - "$2" | gzip -9n >"$3"
  fi
}
pack_zip() { # dir name out
  command -v zip >/dev/null || { echo "release: zip is missing (the Windows archive needs it): apt-get install zip" >&2; exit 1; }
  (cd "$1" && find "$2" -exec touch -h -d "@$epoch" {} + && find "$2" | LC_ALL=C sort | zip -q -X -D "$3" -@)
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dist"
rm -f "$dist"/pem_"$v"_*
archives=()
for t in "${targets[@]}"; do
  os=${t%%/*} arch=${t#*/}
  name=pem_${v}_${os}_${arch}
  exe=pem
  [ "$os" = windows ] && exe=pem.exe
  mkdir -p "$work/$name"
  echo "release: building $name" >&2
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -tags "$tags" -trimpath -buildvcs=auto -ldflags "$ldflags" -o "$work/$name/$exe" ./cmd/pem)
  cp "$root/README.md" "$work/$name/"
  if [ "$os" = windows ]; then
    pack_zip "$work" "$name" "$dist/$name.zip"
    archives+=("$name.zip")
  else
    pack_tar "$work" "$name" "$dist/$name.tar.gz"
    archives+=("$name.tar.gz")
  fi
done
(cd "$dist" && sha256 "${archives[@]}" >"pem_${v}_checksums.txt")
echo "release: $dist/pem_${v}_checksums.txt" >&2
cat "$dist/pem_${v}_checksums.txt"
