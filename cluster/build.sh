#!/usr/bin/env bash
# Builds (or reuses) the local control plane: etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager, kubectl, kwok and helm, all from the
# Go module proxy at the versions pinned in versions.env. The binaries are
# cached outside the repository, keyed by those versions, so a second run
# builds nothing. Prints the bin directory on stdout; progress goes to stderr.
#
# `build.sh operators` does the same for the operators the end-to-end suite
# runs (Kubeflow training-operator and mpi-operator), under a key of their own,
# and copies their CRDs from their modules into the directory beside bin/;
# `build.sh kuberay` does the same for KubeRay's ray-operator;
# `build.sh trainer` for Kubeflow Trainer v2's controller manager and JobSet's;
# `build.sh lws` for LeaderWorkerSet's controller manager;
# `build.sh promtool` for Prometheus's promtool, which tests the chart's alerts.
# `build.sh peers` builds the peer schedulers the comparisons run (Volcano's
# vc-scheduler and vc-controller-manager, YuniKorn's scheduler, Kueue) from
# wrapper modules in cluster/go/ where their own go.mod asks for modules the
# proxy does not serve, and copies their CRDs beside bin/; `build.sh peers kueue`
# builds Kueue alone there (what the end-to-end suite runs, and `make binaries` builds),
# and `build.sh volcano-controller` only vc-controller-manager and Volcano's CRDs, under
# the same key, for the suite's Volcano Jobs.
# `build.sh karpenter` for Karpenter's KWOK provider (it needs a newer Go
# toolchain, which GOTOOLCHAIN fetches through the proxy), its CRDs copied
# beside bin/ (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass).
#
# `build.sh kube VERSION` builds another Kubernetes release's kube-apiserver and
# kube-controller-manager (what `make test-versions` runs), from a module
# cluster/kube-module.sh writes in the cache; etcd, kwok, helm and kubectl are
# the pinned ones, linked beside them. VERSION@goX.Y.Z names the Go toolchain a
# release needs when it is newer than the local one.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
pinned_bin=""
kube_module="$here/go/kube"
kube_commands=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
if [ "${1:-}" = kube ]; then
  pinned_bin="$(bash "${BASH_SOURCE[0]}")"
  requested="${2:?build.sh kube VERSION[@goX.Y.Z]}"
  if [ "${requested%%@*}" = "$KUBE_VERSION" ]; then echo "$pinned_bin"; exit 0; fi
  KUBE_VERSION="${requested%%@*}"
  [ "$requested" != "$KUBE_VERSION" ] && export GOTOOLCHAIN="${requested#*@}"
  kube_commands=(kube-apiserver kube-controller-manager)
fi

key="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"
if [ "${1:-}" = provisioner ]; then
  key="local-path-provisioner-${LOCAL_PATH_PROVISIONER_VERSION}"
fi
if [ "${1:-}" = operators ]; then
  key="training-operator-${TRAINING_OPERATOR_VERSION}_mpi-operator-${MPI_OPERATOR_VERSION}"
fi
if [ "${1:-}" = peers ] || [ "${1:-}" = volcano-controller ]; then
  key="volcano-${VOLCANO_VERSION}_yunikorn-${YUNIKORN_VERSION}_kueue-${KUEUE_VERSION}"
fi
if [ "${1:-}" = kuberay ]; then
  key="kuberay-${KUBERAY_VERSION}"
fi
if [ "${1:-}" = trainer ]; then
  key="trainer-${TRAINER_VERSION}_jobset-${JOBSET_VERSION}"
fi
if [ "${1:-}" = lws ]; then
  key="lws-${LWS_VERSION}"
fi
if [ "${1:-}" = promtool ]; then
  key="promtool-${PROMETHEUS_VERSION}"
fi
if [ "${1:-}" = karpenter ]; then
  key="karpenter-${KARPENTER_VERSION}"
fi
cache="${GANGSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangsched}"
bin="$cache/$key/bin"
mkdir -p "$bin"

say() { printf '[cluster/build] %s\n' "$*" >&2; }

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
kube_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
started=$SECONDS

build_kube() {
  local missing=()
  for cmd in "${kube_commands[@]}"; do
    [ -x "$bin/$cmd" ] || missing+=("k8s.io/kubernetes/cmd/$cmd")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "building ${missing[*]##*/} ${KUBE_VERSION} (cold: about 10 min on 2 cores)"
  (cd "$kube_module" && go build -trimpath -ldflags "$kube_ldflags" -o "$bin/" "${missing[@]}")
}

build_etcd() {
  [ -x "$bin/etcd" ] && return 0
  say "building etcd ${ETCD_VERSION}"
  (cd "$here/go/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .)
}

install_tool() { # name module
  [ -x "$bin/$1" ] && return 0
  say "installing $1 from $2"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "$2"
}

# KWOK's own node lifecycle (Ready at once, heartbeats), from the pinned module:
# since v0.8 it is not applied when a config brings pod stages of its own.
kwok_node_stages() {
  local out="$bin/kwok-node-stages.yaml"
  [ -s "$out" ] && return 0
  local dir
  dir="$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  { cat "$dir/kustomize/stage/node/fast/node-initialize.yaml"; echo "---"
    cat "$dir/kustomize/stage/node/heartbeat/node-heartbeat.yaml"; } > "$out.tmp"
  mv "$out.tmp" "$out"
}

module_dir() { # module@version: its source, fetched through the proxy
  go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

build_operators() {
  local crds="$cache/$key/crds" training mpi
  install_tool training-operator.v1 \
    "github.com/kubeflow/training-operator/cmd/training-operator.v1@${TRAINING_OPERATOR_VERSION}"
  if [ ! -x "$bin/mpi-operator" ]; then
    say "building mpi-operator ${MPI_OPERATOR_VERSION}"
    (cd "$here/go/mpi-operator" && go build -trimpath -ldflags "-s -w" -o "$bin/mpi-operator" \
      github.com/kubeflow/mpi-operator/cmd/mpi-operator)
  fi
  if [ ! -f "$crds/mpijobs.yaml" ]; then
    training="$(module_dir "github.com/kubeflow/training-operator@${TRAINING_OPERATOR_VERSION}")"
    mpi="$(module_dir "github.com/kubeflow/mpi-operator@${MPI_OPERATOR_VERSION}")"
    mkdir -p "$crds"
    # training-operator's own MPIJob (kubeflow.org/v1) would collide with mpi-operator's v2beta1.
    cp "$training/manifests/base/crds/kubeflow.org_tfjobs.yaml" "$crds/tfjobs.yaml"
    cp "$training/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" "$crds/pytorchjobs.yaml"
    cp "$mpi/manifests/base/kubeflow.org_mpijobs.yaml" "$crds/mpijobs.yaml"
    chmod u+w "$crds"/*.yaml
  fi
}

# Volcano's wrapper module (cluster/go/volcano) copied into the cache, its volcano.sh/apis
# pointed at a copy of the served v1.14.0 that also holds the one name v1.15.1's scheduler
# and controller-manager use and v1.14.0 lacks (without it the build stops at
# "undefined: schedulingv1beta1.QueueAllocationGateKey"). The name is the annotation of
# Volcano's opt-in queue allocation gate, which no workload here carries.
volcano_module() {
  local module="$cache/$key/volcano" apis="$cache/$key/volcano-apis" served
  if [ ! -f "$apis/go.mod" ]; then
    served="$(module_dir volcano.sh/apis@v1.14.0)"
    rm -rf "$apis.tmp" && cp -r "$served" "$apis.tmp" && chmod -R u+w "$apis.tmp"
    printf '%s\n\n%s\n' "package v1beta1" \
      'const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"' \
      > "$apis.tmp/pkg/apis/scheduling/v1beta1/queue_allocation_gate.go"
    mv "$apis.tmp" "$apis"
  fi
  mkdir -p "$module"
  cp "$here/go/volcano/go.mod" "$here/go/volcano/go.sum" "$here/go/volcano/tools.go" "$module/"
  (cd "$module" && go mod edit -replace volcano.sh/apis=../volcano-apis)
}

build_peers() {
  local crds="$cache/$key/crds" volcano kueue
  if [ "${2:-}" = kueue ]; then
    install_tool kueue "sigs.k8s.io/kueue/cmd/kueue@${KUEUE_VERSION}"
    if [ ! -f "$crds/kueue/kueue.x-k8s.io_workloads.yaml" ]; then
      kueue="$(module_dir "sigs.k8s.io/kueue@${KUEUE_VERSION}")"
      mkdir -p "$crds/kueue"
      cp "$kueue"/config/components/crd/bases/*.yaml "$crds/kueue/"
      chmod u+w "$crds"/kueue/*.yaml
    fi
    return 0
  fi
  if [ ! -x "$bin/vc-scheduler" ] || [ ! -x "$bin/vc-controller-manager" ]; then
    say "building vc-scheduler and vc-controller-manager ${VOLCANO_VERSION}"
    volcano_module
    (cd "$cache/$key/volcano" && go build -trimpath -ldflags "-s -w" -o "$bin/" \
      volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager)
    mv "$bin/scheduler" "$bin/vc-scheduler"
    mv "$bin/controller-manager" "$bin/vc-controller-manager"
  fi
  if [ ! -x "$bin/yunikorn-scheduler" ]; then
    say "building yunikorn-scheduler ${YUNIKORN_VERSION}"
    (cd "$here/go/yunikorn" && go build -trimpath -ldflags "-s -w" -o "$bin/yunikorn-scheduler" \
      github.com/apache/yunikorn-k8shim/pkg/cmd/shim)
  fi
  install_tool kueue "sigs.k8s.io/kueue/cmd/kueue@${KUEUE_VERSION}"
  if [ ! -f "$crds/volcano/flow.volcano.sh_jobflows.yaml" ] \
    || [ ! -f "$crds/kueue/kueue.x-k8s.io_workloads.yaml" ]; then
    volcano="$(module_dir "volcano.sh/volcano@${VOLCANO_VERSION}")"
    kueue="$(module_dir "sigs.k8s.io/kueue@${KUEUE_VERSION}")"
    mkdir -p "$crds/volcano" "$crds/kueue"
    cp "$volcano"/config/crd/volcano/bases/*.yaml "$volcano"/config/crd/jobflow/bases/*.yaml \
      "$crds/volcano/"
    cp "$kueue"/config/components/crd/bases/*.yaml "$crds/kueue/"
    chmod u+w "$crds"/*/*.yaml
  fi
}

# What the suite's Volcano Jobs need of the peers: the controller-manager and the CRDs.
build_volcano_controller() {
  local crds="$cache/$key/crds/volcano"
  if [ ! -x "$bin/vc-controller-manager" ]; then
    say "building vc-controller-manager ${VOLCANO_VERSION}"
    volcano_module
    (cd "$cache/$key/volcano" && go build -trimpath -ldflags "-s -w" \
      -o "$bin/vc-controller-manager" volcano.sh/volcano/cmd/controller-manager)
  fi
  if [ ! -f "$crds/batch.volcano.sh_jobs.yaml" ]; then
    mkdir -p "$crds"
    cp "$(module_dir "volcano.sh/volcano@${VOLCANO_VERSION}")"/config/crd/volcano/bases/*.yaml \
      "$crds/"
    chmod u+w "$crds"/*.yaml
  fi
}

if [ "${1:-}" = volcano-controller ]; then
  build_volcano_controller
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = peers ]; then
  build_peers "$@"
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = operators ]; then
  build_operators
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = kuberay ]; then
  install_tool ray-operator "github.com/ray-project/kuberay/ray-operator@${KUBERAY_VERSION}"
  if [ ! -f "$cache/$key/crds/ray.io_rayservices.yaml" ]; then
    mkdir -p "$cache/$key/crds"
    cp "$(module_dir "github.com/ray-project/kuberay/ray-operator@${KUBERAY_VERSION}")"/config/crd/bases/ray.io_*.yaml \
      "$cache/$key/crds/"
    chmod u+w "$cache/$key/crds"/*.yaml
  fi
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = trainer ]; then
  for cmd in jobset:sigs.k8s.io/jobset \
    trainer-controller-manager:github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager; do
    [ -x "$bin/${cmd%%:*}" ] && continue
    say "building ${cmd%%:*} (JobSet ${JOBSET_VERSION}, Trainer ${TRAINER_VERSION})"
    (cd "$here/go/trainer" && go build -trimpath -ldflags "-s -w" -o "$bin/${cmd%%:*}" "${cmd#*:}")
  done
  if [ ! -f "$cache/$key/crds/jobset.x-k8s.io_jobsets.yaml" ]; then
    mkdir -p "$cache/$key/crds"
    cp "$(module_dir "github.com/kubeflow/trainer/v2@${TRAINER_VERSION}")"/manifests/base/crds/trainer.kubeflow.org_*.yaml \
      "$(module_dir "sigs.k8s.io/jobset@${JOBSET_VERSION}")"/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml \
      "$cache/$key/crds/"
    chmod u+w "$cache/$key/crds"/*.yaml
  fi
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = lws ]; then
  if [ ! -x "$bin/lws-controller-manager" ]; then
    say "building lws-controller-manager ${LWS_VERSION}"
    (cd "$here/go/lws" && go build -trimpath -ldflags "-s -w" -o "$bin/lws-controller-manager" \
      sigs.k8s.io/lws/cmd)
  fi
  if [ ! -f "$cache/$key/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml" ]; then
    mkdir -p "$cache/$key/crds"
    cp "$(module_dir "sigs.k8s.io/lws@${LWS_VERSION}")"/config/crd/bases/*.yaml "$cache/$key/crds/"
    chmod u+w "$cache/$key/crds"/*.yaml
  fi
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = promtool ]; then
  install_tool promtool "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}"
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = karpenter ]; then
  if [ ! -x "$bin/karpenter" ]; then # its main package is named kwok
    GOTOOLCHAIN="$KARPENTER_GO" install_tool kwok "sigs.k8s.io/karpenter/kwok@${KARPENTER_VERSION}"
    mv "$bin/kwok" "$bin/karpenter"
  fi
  if [ ! -f "$cache/$key/crds/kwoknodeclasses.yaml" ]; then
    src="$(GOTOOLCHAIN="$KARPENTER_GO" module_dir "sigs.k8s.io/karpenter@${KARPENTER_VERSION}")"
    mkdir -p "$cache/$key/crds"
    for kind in nodepools nodeclaims nodeoverlays; do
      cp "$src/pkg/apis/crds/karpenter.sh_$kind.yaml" "$cache/$key/crds/$kind.yaml"
    done
    cp "$src/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" "$cache/$key/crds/kwoknodeclasses.yaml"
    chmod u+w "$cache/$key/crds"/*.yaml
  fi
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = provisioner ]; then
  install_tool local-path-provisioner \
    "github.com/rancher/local-path-provisioner@${LOCAL_PATH_PROVISIONER_VERSION}"
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

if [ "${1:-}" = kube ]; then
  kube_module="$cache/$key/module"
  [ -s "$kube_module/go.sum" ] || bash "$here/kube-module.sh" "$KUBE_VERSION" "$kube_module"
  for tool in etcd kwok helm kubectl kwok-node-stages.yaml; do
    ln -sf "$pinned_bin/$tool" "$bin/$tool"
  done
  build_kube
  [ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
  echo "$bin"
  exit 0
fi

build_etcd
install_tool kwok "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
kwok_node_stages
install_tool helm "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
build_kube
[ $((SECONDS - started)) -gt 1 ] && say "done in $((SECONDS - started)) s"
echo "$bin"
