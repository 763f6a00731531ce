#!/usr/bin/env bash
# Runs golangci-lint, at the version pinned in tools/go.mod, with the given
# arguments (make lint: scripts/golangci-lint.sh run ./...).
#
# bin/golangci-lint is reused while it is that version. Otherwise it is
# installed first:
#   1. the release binary from GitHub, checked against the release's
#      SHA-256 checksums: a few seconds;
#   2. when GitHub cannot be reached, built from source through the Go
#      module proxy, every module pinned by tools/go.sum: a few minutes on
#      two cores, once per machine (bin/ keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=$(awk '$1 == "github.com/golangci/golangci-lint/v2" { print $2 }' tools/go.mod)
if [ -z "$version" ]; then
  echo "golangci-lint: no version in tools/go.mod" >&2
  exit 1
fi
bin=$PWD/bin/golangci-lint

current() {
  [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -q "has version ${version#v} "
}

# download fetches the release binary; it fails (and changes nothing) when
# GitHub is out of reach or the checksum does not match.
download() (
  command -v curl >/dev/null 2>&1 || exit 1
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  case $(uname -m) in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) exit 1 ;;
  esac
  name=golangci-lint-${version#v}-$os-$arch
  url=https://github.com/golangci/golangci-lint/releases/download/$version
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cd "$tmp"
  curl -fsSL --connect-timeout 5 --max-time 120 -o "$name.tar.gz" "$url/$name.tar.gz" || exit 1
  curl -fsSL --connect-timeout 5 --max-time 30 -o sums "$url/golangci-lint-${version#v}-checksums.txt" || exit 1
  if ! grep " $name.tar.gz\$" sums | sha256sum -c --status -; then
    echo "golangci-lint: $name.tar.gz does not match the release's checksum" >&2
    exit 1
  fi
  tar -xzf "$name.tar.gz" "$name/golangci-lint"
  mv "$name/golangci-lint" "$bin"
)

build() {
  echo "golangci-lint: building $version from source (tools/go.mod), once per machine" >&2
  "$GO" build -C tools -o "$bin" github.com/golangci/golangci-lint/v2/cmd/golangci-lint
}

if ! current; then
  mkdir -p "$(dirname "$bin")"
  echo "golangci-lint: installing $version into bin/" >&2
  download || build
  current || { echo "golangci-lint: bin/golangci-lint is not $version" >&2; exit 1; }
fi
exec "$bin" "$@"
