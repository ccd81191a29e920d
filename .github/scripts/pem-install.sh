#!/usr/bin/env bash
# Installs a pem release into DIR: downloads the archive for this machine and
# the release's checksum file, verifies the archive's SHA-256, unpacks pem
# and checks that it reports VERSION. Nothing is downloaded when DIR already
# holds that version (the workflows cache DIR with actions/cache).
#
#   .github/scripts/pem-install.sh VERSION DIR
#
# Environment: PEM_RELEASES, where the releases are (default
# https://github.com/pemdev/pem/releases/download; any URL curl reads, file://
# included, laid out as <PEM_RELEASES>/<VERSION>/<file>).
set -euo pipefail

version=${1:?usage: pem-install.sh VERSION DIR}
dir=${2:?usage: pem-install.sh VERSION DIR}
releases=${PEM_RELEASES:-https://github.com/pemdev/pem/releases/download}
case $version in
  v[0-9]*) ;;
  *) echo "pem-install: $version is not a release tag: pin one, like v0.1.0 (go install ...@latest is not reproducible)" >&2; exit 2 ;;
esac
v=${version#v}

if [ -x "$dir/pem" ] && "$dir/pem" --version 2>/dev/null | grep -q "^pem $version "; then
  echo "pem-install: $("$dir/pem" --version) (cached in $dir)"
  exit 0
fi

case $(uname -s) in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "pem-install: no release archive for $(uname -s): build pem with go install github.com/pemdev/pem/cmd/pem@$version" >&2; exit 1 ;;
esac
case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "pem-install: no release archive for $(uname -m): build pem with go install github.com/pemdev/pem/cmd/pem@$version" >&2; exit 1 ;;
esac
archive=pem_${v}_${os}_${arch}.tar.gz
sums=pem_${v}_checksums.txt

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$archive" "$sums"; do
  curl -fsSL --retry 3 -o "$tmp/$f" "$releases/$version/$f"
done
line=$(grep -E "^[0-9a-f]{64}  $archive\$" "$tmp/$sums" || true)
if [ -z "$line" ]; then
  echo "pem-install: $sums lists no $archive" >&2
  exit 1
fi
want=${line%% *}
if command -v sha256sum >/dev/null; then
  got=$(sha256sum "$tmp/$archive")
else
  got=$(shasum -a 256 "$tmp/$archive")
fi
got=${got%% *}
if [ "$got" != "$want" ]; then
  echo "pem-install: $archive has SHA-256 $got, the release lists $want: refusing it" >&2
  exit 1
fi
tar -xzf "$tmp/$archive" -C "$tmp"
mkdir -p "$dir"
mv "$tmp/pem_${v}_${os}_${arch}/pem" "$dir/pem"
if ! "$dir/pem" --version | grep -q "^pem $version "; then
  echo "pem-install: the installed pem reports '$("$dir/pem" --version)', not $version" >&2
  exit 1
fi
echo "pem-install: $("$dir/pem" --version) (SHA-256 $got verified) in $dir"
