#!/usr/bin/env bash
# Fetches Istio's Helm charts for the facts stage from the Go module proxy: the istio.io/istio
# module at a pinned version (Istio tags no Go release, so a pseudo-version: master of
# 2026-08-27), checked against its pinned hash, as a Go module cache entry (about 12 MB, once
# per machine). Prints the folder of its charts (manifests/charts).
set -euo pipefail
version=v0.0.0-20260827124520-eed52ebb66ad
sum="h1:ui9TJjRMAV/hb5ehQaZDq7IUGxuQP6dra9lapT/VjHI="
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH"
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# A module of its own, so that the download touches none of the repository's go.mod files.
printf 'module meshlife.dev/istio-charts\n\ngo 1.26.0\n' > "$scratch/go.mod"
info="$(cd "$scratch" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "istio.io/istio@$version")"
got="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p')"
dir="$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [ "$got" != "$sum" ]; then
    echo "compat/cluster/istio-charts.sh: istio.io/istio@$version has hash ${got:-none}, not the pinned $sum" >&2
    printf '%s\n' "$info" >&2
    exit 2
fi
echo "$dir/manifests/charts"
