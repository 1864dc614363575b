#!/usr/bin/env bash
# Writes the Go module that builds one Kubernetes release's control plane:
# `kube-module.sh VERSION DIR` leaves go.mod, go.sum and tools.go in DIR,
# requiring k8s.io/kubernetes at VERSION with every staging module it replaces
# by a local path replaced instead by its published v0.X.Y twin. The pinned
# release's module is committed in cluster/go/kube; `make test-versions` makes
# the others in the build cache with this script.
set -euo pipefail
version="$1" dir="$2"
staging="v0.${version#v1.}"
mkdir -p "$dir"
gomod="$(go mod download -json "k8s.io/kubernetes@${version}" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
go_line="$(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
{
  echo "// Builds the Kubernetes ${version} control-plane binaries from k8s.io/kubernetes"
  echo "// through the Go module proxy. The staging modules are replaced by their"
  echo "// published ${staging} twins because k8s.io/kubernetes requires them as v0.0.0."
  echo "// Written by cluster/kube-module.sh; do not edit by hand."
  echo "module gangsched.local/cluster/kube"
  echo
  echo "go ${go_line}"
  echo
  echo "require k8s.io/kubernetes ${version}"
  echo
  echo "replace ("
  sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$|\t\1 => \1 '"${staging}"'|p' "$gomod"
  echo ")"
} > "$dir/go.mod"
cat > "$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the control-plane commands the test harness builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy -e >/dev/null 2>"$dir/tidy.err") || true
# A module the proxy does not serve leaves go.sum incomplete: say which, and leave no
# go.sum behind, so the next build writes the module again instead of reusing it.
if grep -q "not available" "$dir/tidy.err"; then
  grep -m 3 "not available" -B 1 "$dir/tidy.err" >&2
  rm -f "$dir/go.sum"
  exit 1
fi
