#!/usr/bin/env bash
# make kind-demo: gangsched on a kind cluster, for machines with Docker.
#
# Creates (or reuses) a kind cluster, builds the image from Dockerfile and
# loads it into the cluster's node, installs the chart with that image, waits
# for the Deployment to be ready (its readiness probe is /readyz), then
# applies the examples: a small CPU gang that runs, and the PyTorch DDP example
# that asks for GPUs kind does not have, so `gangsched explain` says why it waits.
# Needs docker, kind, kubectl and helm on PATH. KIND_CLUSTER names the cluster
# (gangsched); `kind delete cluster --name gangsched` removes everything.
set -euo pipefail
cd "$(dirname "$0")/.."

cluster="${KIND_CLUSTER:-gangsched}"
image="gangsched:kind-demo"
for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "kind-demo needs $tool on PATH" >&2; exit 1; }
done
say() { printf '[kind-demo] %s\n' "$*" >&2; }

if ! kind get clusters | grep -qx "$cluster"; then
  say "creating kind cluster $cluster"
  kind create cluster --name "$cluster" --wait 120s
fi
kubectl config use-context "kind-$cluster" >/dev/null

say "building $image and loading it into the cluster"
docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"

say "installing the chart"
helm upgrade --install gangsched helm/gangsched \
  --namespace gangsched-system --create-namespace \
  --set image.repository=gangsched --set image.tag=kind-demo --set image.pullPolicy=Never \
  --set priorityClassName=""
kubectl -n gangsched-system rollout status deployment/gangsched --timeout=180s

say "applying the examples"
kubectl apply -f examples/queues.yaml
kubectl apply -f examples/pytorch-ddp.yaml
kubectl apply -f - <<'YAML'
apiVersion: scheduling.gangsched.io/v1alpha1
kind: PodGroup
metadata: {name: hello, namespace: default}
spec: {minMember: 3}
---
apiVersion: batch/v1
kind: Job
metadata: {name: hello, namespace: default}
spec:
  completions: 3
  parallelism: 3
  template:
    metadata:
      labels: {scheduling.gangsched.io/pod-group: hello}
    spec:
      schedulerName: gang
      restartPolicy: Never
      containers:
      - name: hello
        image: busybox:1.36
        command: [sh, -c, "echo all three workers started together; sleep 5"]
        resources: {requests: {cpu: 100m, memory: 32Mi}}
YAML
kubectl wait --for=condition=complete job/hello --timeout=180s
kubectl get podgroups.scheduling.gangsched.io -A
if [ -x .venv/bin/gangsched ]; then
  .venv/bin/gangsched status
  .venv/bin/gangsched explain podgroup/ddp -n default
fi
say "done; remove it with: kind delete cluster --name $cluster"
