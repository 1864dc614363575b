# gangsched — every target works on a fresh machine: it makes what it needs.
SHELL := bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
NODES ?= 4
NODE_CPU ?= 4
NODE_MEMORY ?= 16Gi
NODE_GPUS ?= 0
WITH_KUBE_SCHEDULER ?= 1
WITH_CONTROLLER_MANAGER ?= 0
NATIVE_GANG ?= 0
KEEP_STATE ?= 0
PYTEST_ARGS ?=

ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := $(HOME)/.cache/gangsched/actionlint-$(ACTIONLINT_VERSION)/actionlint

.PHONY: test test-versions unit e2e lint lock docs actionlint image binaries cluster-up cluster-down demo demo-peers demo-autoscaling kind-demo bench bench-core bench-scenarios bench-scheduler bench-peers bench-latency bench-scale bench-topology bench-soak bench-oracle bench-full-cycle bench-eta bench-dra bench-dra-oracle bench-rules clean

LOCK := requirements.lock

## The virtualenv, from the pinned set in requirements.lock, the package itself editable.
$(VENV)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	touch $@

## Pin the dependency set again (after a change to pyproject's dependencies, or to take updates).
lock: $(VENV)/.installed
	$(BIN)/pip-compile -q --upgrade --extra dev --strip-extras --no-emit-index-url \
	  --no-emit-find-links --unsafe-package gangsched -o $(LOCK) pyproject.toml

## docs/configuration.md from the CLI's own options (a unit test fails when it is stale).
docs: $(VENV)/.installed
	$(BIN)/python -m gangsched.cli_reference > docs/configuration.md

## Build (or reuse from ~/.cache/gangsched) the pinned control-plane binaries, promtool and
## the peers and clients the suite runs (Kueue and vc-controller-manager alone of the peers,
## ray-operator, Trainer's, JobSet's and LeaderWorkerSet's controller managers, Karpenter's
## KWOK provider: the autoscaler of the end-to-end suite).
binaries:
	@bash cluster/build.sh >/dev/null
	@bash cluster/build.sh promtool >/dev/null
	@bash cluster/build.sh peers kueue >/dev/null
	@bash cluster/build.sh volcano-controller >/dev/null
	@bash cluster/build.sh kuberay >/dev/null
	@bash cluster/build.sh trainer >/dev/null
	@bash cluster/build.sh lws >/dev/null
	@bash cluster/build.sh karpenter >/dev/null

## The whole suite: lint and types, unit tests, end-to-end tests on a real control plane.
test: $(VENV)/.installed binaries lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## Each Kubernetes release of KUBE_TEST_VERSIONS (cluster/versions.env) built or reused
## and smoke-tested: bench/results/versions.json and README's supported-versions table.
test-versions: $(VENV)/.installed binaries
	$(BIN)/python -m bench.versions -- $(PYTEST_ARGS)

unit: $(VENV)/.installed
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

e2e: $(VENV)/.installed binaries
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

lint: $(VENV)/.installed actionlint
	$(BIN)/ruff check gangsched devcluster tests bench demo
	$(BIN)/mypy
	$(BIN)/lint-imports
	set -o pipefail; $$(bash cluster/build.sh)/helm lint --quiet helm/gangsched 2>&1 \
	  | { grep -v 'symbolic link in path' || true; }

## The GitHub workflows, linted by actionlint built from the Go module proxy (pinned, cached).
actionlint: $(ACTIONLINT)
	$(ACTIONLINT) -no-color .github/workflows/*.yml

$(ACTIONLINT):
	GOBIN=$(dir $@) GOFLAGS=-trimpath go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

## The OCI image without a container engine (debootstrap + umoci, as root; cached in
## ~/.cache/gangsched/image): prints the directory holding gangsched.oci.tar.
image: $(VENV)/.installed
	@bash image/build.sh

cluster-up: $(VENV)/.installed binaries
	@$(BIN)/python -m devcluster up --nodes $(NODES) --node-cpu $(NODE_CPU) \
	  --node-memory $(NODE_MEMORY) --node-gpus $(NODE_GPUS) \
	  $(if $(filter 1,$(WITH_KUBE_SCHEDULER)),--with-kube-scheduler) \
	  $(if $(filter 1,$(WITH_CONTROLLER_MANAGER)),--with-controller-manager) \
	  $(if $(filter 1,$(NATIVE_GANG)),--native-gang) \
	  $(if $(filter 1,$(WITH_PROVISIONER)),--with-provisioner) \
	  $(if $(filter 1,$(KEEP_STATE)),--keep-state)

cluster-down: $(VENV)/.installed
	@$(BIN)/python -m devcluster down

## The seed workloads under kube-scheduler alone, then gangsched (then kube-scheduler's
## native gang scheduling), side by side; writes demo-out/ and stops every process.
demo: $(VENV)/.installed binaries
	@$(BIN)/python -m demo

## The same with the peers beside them (Volcano, YuniKorn, Kueue: built from the Go module
## proxy on first use, cluster/build.sh peers): writes demo-out/peers/, bench/results/peers.json
## and the table docs/comparison.md and README quote.
demo-peers: $(VENV)/.installed binaries
	@bash cluster/build.sh peers >/dev/null
	@$(BIN)/python -m demo --peers --out demo-out/peers

## Gangs on nodes Karpenter buys: kube-scheduler and gangsched, each with Karpenter, side by side.
demo-autoscaling: $(VENV)/.installed binaries
	@$(BIN)/python -m demo --scenario autoscaling --contender kube-scheduler --contender gangsched

## For machines with Docker: a kind cluster, the image built and loaded, helm install, the examples.
kind-demo:
	@bash cluster/kind-demo.sh

## Benchmarks write their figures to bench/results/.
bench: bench-core bench-scenarios bench-scheduler bench-latency bench-scale

bench-core: $(VENV)/.installed
	$(BIN)/python -m bench.core

## Wall time of each deadlock scenario under kube-scheduler and under gangsched.
bench-scenarios: $(VENV)/.installed binaries
	rm -f bench/results/scenarios.jsonl
	GANGSCHED_E2E_TIMES=bench/results/scenarios.jsonl $(BIN)/python -m pytest -q \
	  tests/e2e/test_spark.py tests/e2e/test_training_jobs.py tests/e2e/test_gpu_blocker.py

## Pods bound per second on 1,000 KWOK nodes, 5,000 pods: gangsched (gangs of 8) vs kube-scheduler
## (throttled, unthrottled, native gangs) and a client that only binds; 3 rounds of the quick ones.
bench-scheduler: $(VENV)/.installed binaries
	$(BIN)/python -m bench.scheduler

## Not part of `bench`: the backlog of bench-scheduler drained by gangsched, Volcano, YuniKorn and
## Kueue with kube-scheduler, with and without waitForPodsReady (cluster/build.sh peers), each on
## a fresh control plane: bench/results/peers-throughput.json.
bench-peers: $(VENV)/.installed binaries
	@bash cluster/build.sh peers >/dev/null
	$(BIN)/python -m bench.peers

## kube-scheduler as the oracle: >= 2,000 random (pod, node) pairs, gangsched's filter must
## agree on each; GANGSCHED_ORACLE_SEED replays a run. Not part of `bench`.
## The full cycle of bench-scale (5,000 nodes, 2,500 gangs) in-process: the core's CPU time alone.
## Gangs of 8 with one-per-node anti-affinity and zone spread on 1,000 nodes in 10 zones:
## gangsched's backlog against unthrottled kube-scheduler on the same pods.
bench-rules: $(VENV)/.installed binaries
	$(BIN)/python -m bench.rules

bench-full-cycle: $(VENV)/.installed
	$(BIN)/python -m bench.full_cycle

## Estimated starts against actual starts, and backfill on and off, in-process over the step.
bench-eta: $(VENV)/.installed
	$(BIN)/python -m bench.eta

bench-oracle: $(VENV)/.installed binaries
	$(BIN)/python -m bench.fit_oracle

## Devices: 500 nodes of 8 fake GPUs, 250 gangs of 8 pods with 1-2 claims each from templates,
## as a backlog for gangsched then kube-scheduler on the same control plane; then the core alone.
bench-dra: $(VENV)/.installed binaries
	$(BIN)/python -m bench.dra

## kube-scheduler as the oracle of device claims: >= 500 random (claim, node) pairs, some with
## inter-pod rules, shared or admin access; gangsched must agree on each;
## GANGSCHED_ORACLE_SEED replays a run. Not part of `bench`.
bench-dra-oracle: $(VENV)/.installed binaries
	$(BIN)/python -m bench.dra_oracle

## Gang latency (last pod created to all bound) at 5, 10 and 20 gangs/s on 1,000 KWOK nodes.
bench-latency: $(VENV)/.installed binaries
	$(BIN)/python -m bench.latency

## 5,000 nodes and 20,000 pods, half of them waiting: cycle times, idle cycle, peak memory.
bench-scale: $(VENV)/.installed binaries
	$(BIN)/python -m bench.scale

## Not part of `bench`: a seeded trace of topology gangs on 1,024 nodes in blocks and racks,
## gangsched, kube-scheduler's native gangs, Volcano with HyperNodes and Kueue's TAS
## (cluster/build.sh peers) in turn; `NODES=256` for a quick look.
bench-topology: $(VENV)/.installed binaries
	@bash cluster/build.sh peers >/dev/null
	$(BIN)/python -m bench.topology $(if $(NODES),--nodes $(NODES))

## Not part of `bench`: gangs replaced at a steady rate for SOAK_MINUTES (30), memory and
## write queue sampled; `make bench-soak SOAK_MINUTES=5` for a shorter run.
SOAK_MINUTES ?= 30
bench-soak: $(VENV)/.installed binaries
	$(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES)

clean:
	rm -rf $(VENV) .cluster demo-out .pytest_cache .mypy_cache .ruff_cache .hypothesis
