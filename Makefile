# memcached-operator: build, test and demo targets. Run `make help` for the list.

SHELL := /usr/bin/env bash -o errexit -o nounset -o pipefail

# VERSION is the operator release stamped into the binary, the image tag and the CSV.
VERSION ?= 0.0.2
# REPLACES is the CSV version that the rendered CSV upgrades from (empty for the first release).
REPLACES ?= 0.0.1
# IMG is the operator image that `make image`, `make push` and `make deploy` use.
IMG ?= quay.io/example/memcached-operator:v$(VERSION)
# NAMESPACE is where `make deploy` and `make run` put and watch the operator.
NAMESPACE ?= default
# SCOPE is what `make deploy` and `make undeploy` install: namespace, the guide's operator
# that watches NAMESPACE with deploy/rbac.yaml's Role; or cluster, one operator in NAMESPACE
# that watches every namespace (WATCH_NAMESPACE="") with deploy/cluster/'s ClusterRole,
# its Lease in NAMESPACE alone.
SCOPE ?= namespace
# KUBECONFIG is the cluster that `make run`, `make deploy` and `make undeploy` talk to.
KUBECONFIG ?= $(HOME)/.kube/config
# MEMCACHED_IMAGE, when set, is the memcached image that `make deploy` and `make run`
# give the operator (its MEMCACHED_IMAGE); empty keeps the operator's default.
MEMCACHED_IMAGE ?=
# SIDECAR_VERSION is the sidecar's own release, read from pkg/sidecar/VERSION (edit
# that file, which the sidecar and the operator's default embed): not VERSION, so an
# operator release that leaves the sidecar alone names the same sidecar image and rolls
# no pod. test/dep's TestSidecarVersionFollowsItsSources says when it must change.
SIDECAR_VERSION := $(shell cat pkg/sidecar/VERSION)
# SIDECAR_IMG is the sidecar image that `make sidecar-image` and `make sidecar-push` use.
SIDECAR_IMG ?= quay.io/example/memcached-sidecar:v$(SIDECAR_VERSION)
# SIDECAR_IMAGE, when set, is the sidecar image that `make deploy` gives the operator
# (its SIDECAR_IMAGE); empty keeps deploy/operator.yaml's.
SIDECAR_IMAGE ?=
# E2E_PARALLEL is how many parallel tests of one suite `make e2e` runs at once; the
# suites wait on the control plane and timers more than they compute.
E2E_PARALLEL ?= 4
# E2E_PACKAGES is how many test packages `make e2e` runs at once (`go test -p`). At 3,
# the real-node suite, the longest and mostly waiting on the kubelet, OLM and
# timers, starts beside the fake-node suite and the image builds instead of after
# the image suite.
E2E_PACKAGES ?= 3
# N and SIZE are the number of Memcached resources and their size in `make bench`;
# NAMESPACES is how many namespaces it spreads them over (more than 1: one operator
# watches every namespace).
N ?= 1000
SIZE ?= 2
NAMESPACES ?= 1
# BENCH_TIMEOUT bounds one `make bench`: N=1000 takes about 10 minutes, N=10000 about ten
# times that.
BENCH_TIMEOUT ?= 60m
# FUZZTIME is how much `make fuzz` runs each fuzz test: a count of inputs (20000x, a few
# seconds each on 2 cores), not a duration. With a duration, Go 1.26's fuzzing coordinator
# can fail a target with a bare "context deadline exceeded" as the time runs out on a busy
# machine (golang/go#75804, fixed in Go 1.27): FuzzWindowAt did so in a `make test`.
FUZZTIME ?= 20000x

# GOVULNDB is the Go vulnerability database that `make vulncheck` reads: a URL, or
# file:///ABSOLUTE/PATH of a copy (.ci/run gives CI's ../shared/vulndb); empty means
# https://vuln.go.dev.
GOVULNDB ?=

OUTPUT := tmp/_output
# SHARED_ENV and SHARED_FLAGS are the go command's environment and flags for every
# compile but the race detector's: those of tmp/build/build.sh and
# test/scripts/build-tools.sh. With them, vet, the end-to-end suites, the operator and
# the tools share one compilation of each package they have in common (test/dep's
# TestToolModulesShareBuilds keeps the test module on the tools' versions); without, a
# cold `make test` compiles the Kubernetes libraries twice more. -trimpath is a flag,
# not GOFLAGS, so the suites' own `go build -race` matches `make unit`'s.
SHARED_ENV := CGO_ENABLED=0
SHARED_FLAGS := -trimpath
# DEPLOY_DIR holds the manifest `make deploy` renders, one folder per namespace, so
# that deploys to two namespaces at once never share a file.
DEPLOY_DIR = $(OUTPUT)/deploy/$(NAMESPACE)
BIN := $(OUTPUT)/bin/memcached-operator

export VERSION IMG NAMESPACE GOVULNDB

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value]\n"} \
		/^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build the static operator and sidecar binaries into tmp/_output/bin.
	tmp/build/build.sh

.PHONY: generate
generate: ## Regenerate zz_generated.deepcopy.go, Gopkg.toml, Gopkg.lock and deploy/monitoring's PrometheusRules.
	tmp/codegen/update-generated.sh
	tmp/codegen/update-gopkg.sh
	tmp/codegen/update-monitoring.sh

.PHONY: verify
verify: ## Fail when gofmt, go vet, generated code, Gopkg, the PrometheusRules or the OLM catalog are stale.
	tmp/codegen/verify-generated.sh
	tmp/codegen/update-gopkg.sh --verify
	tmp/codegen/update-monitoring.sh --verify
	test/scripts/olm-catalog.sh --verify
	@test -z "$$(gofmt -l cmd pkg test)" || { gofmt -l cmd pkg test; echo "gofmt: files above need formatting"; exit 1; }
	$(SHARED_ENV) go vet $(SHARED_FLAGS) ./...
	cd test && $(SHARED_ENV) go vet $(SHARED_FLAGS) ./...

.PHONY: unit
unit: ## Run the operator's unit tests with the race detector.
	go test -race -count=1 ./...

.PHONY: run
run: build ## Run the operator locally against KUBECONFIG (the SDK's `up local`).
	KUBERNETES_CONFIG=$(KUBECONFIG) WATCH_NAMESPACE=$(NAMESPACE) MEMCACHED_IMAGE=$(MEMCACHED_IMAGE) $(BIN) --log-level=debug

##@ Local cluster

.PHONY: tools
tools: ## Build the control plane, kubelet, kube-proxy, etcd, kwok, kubectl, OLM, operator-sdk v0.0.7, kube-score, govulncheck and kube-router (the real-node suite's NetworkPolicy firewall, tests only) from Go modules into tmp/_output/tools.
	test/scripts/build-tools.sh

.PHONY: demo
demo: ## Run the guide on a local Kubernetes 1.37 cluster with a real node (fake nodes where it cannot run).
	test/scripts/demo.sh up

.PHONY: demo-down
demo-down: ## Stop the demo: operator, real node (restoring the host), registry and cluster.
	test/scripts/demo.sh down

##@ Image

.PHONY: image
image: build ## Build the operator image IMG with docker, podman or buildah.
	tmp/build/image.sh build "$(IMG)"

.PHONY: push
push: ## Push the operator image IMG.
	tmp/build/image.sh push "$(IMG)"

.PHONY: sidecar-image
sidecar-image: build ## Build the sidecar image SIDECAR_IMG with docker, podman or buildah.
	COMPONENT=sidecar tmp/build/image.sh build "$(SIDECAR_IMG)"

.PHONY: sidecar-push
sidecar-push: ## Push the sidecar image SIDECAR_IMG.
	COMPONENT=sidecar tmp/build/image.sh push "$(SIDECAR_IMG)"

.PHONY: images
images: ## Build the real node's images (pause, memcached, the operator per release, the sidecar's release) into the local registry.
	test/scripts/images.sh build

##@ Deploy

# SCOPE_RBAC is the RBAC of SCOPE that `make deploy` applies from DEPLOY_DIR and deploy/.
ifeq ($(SCOPE),namespace)
SCOPE_RBAC = -f deploy/rbac.yaml
else ifeq ($(SCOPE),cluster)
SCOPE_RBAC = -f deploy/cluster/cluster-role.yaml -f $(DEPLOY_DIR)/cluster-role-binding.yaml -f deploy/cluster/leader-election.yaml
else
$(error SCOPE=$(SCOPE): want namespace or cluster)
endif

.PHONY: deploy
deploy: ## Apply deploy/ to KUBECONFIG with the operator image IMG (and MEMCACHED_IMAGE, SIDECAR_IMAGE, if set); SCOPE=cluster watches every namespace, with deploy/cluster/'s ClusterRole.
	@mkdir -p $(DEPLOY_DIR)
	tmp/build/render-operator.sh "$(IMG)" > $(DEPLOY_DIR)/operator.yaml
	if [[ "$(SCOPE)" == cluster ]]; then \
		kubectl set env --local -f $(DEPLOY_DIR)/operator.yaml -c memcached-operator WATCH_NAMESPACE= -o yaml > $(DEPLOY_DIR)/operator.env.yaml; \
		mv -f $(DEPLOY_DIR)/operator.env.yaml $(DEPLOY_DIR)/operator.yaml; \
		sed 's/^    namespace: default$$/    namespace: $(NAMESPACE)/' deploy/cluster/cluster-role-binding.yaml > $(DEPLOY_DIR)/cluster-role-binding.yaml; \
		grep -q '^    namespace: $(NAMESPACE)$$' $(DEPLOY_DIR)/cluster-role-binding.yaml; \
	fi
	if [[ -n "$(MEMCACHED_IMAGE)" ]]; then \
		kubectl set env --local -f $(DEPLOY_DIR)/operator.yaml -c memcached-operator MEMCACHED_IMAGE="$(MEMCACHED_IMAGE)" -o yaml > $(DEPLOY_DIR)/operator.env.yaml; \
		mv -f $(DEPLOY_DIR)/operator.env.yaml $(DEPLOY_DIR)/operator.yaml; \
	fi
	if [[ -n "$(SIDECAR_IMAGE)" ]]; then \
		kubectl set env --local -f $(DEPLOY_DIR)/operator.yaml -c memcached-operator SIDECAR_IMAGE="$(SIDECAR_IMAGE)" -o yaml > $(DEPLOY_DIR)/operator.env.yaml; \
		mv -f $(DEPLOY_DIR)/operator.env.yaml $(DEPLOY_DIR)/operator.yaml; \
	fi
	KUBECONFIG=$(KUBECONFIG) kubectl get namespace $(NAMESPACE) >/dev/null 2>&1 || KUBECONFIG=$(KUBECONFIG) kubectl create namespace $(NAMESPACE)
	KUBECONFIG=$(KUBECONFIG) kubectl apply -n $(NAMESPACE) -f deploy/crd.yaml -f deploy/tenant-roles.yaml -f deploy/sa.yaml $(SCOPE_RBAC) -f $(DEPLOY_DIR)/operator.yaml -f deploy/pdb.yaml -f deploy/networkpolicy.yaml

.PHONY: undeploy
undeploy: ## Delete the operator, its PodDisruptionBudget and NetworkPolicy, RBAC of SCOPE (SCOPE=cluster: the ClusterRole and its binding too) and ServiceAccount from NAMESPACE; never the CRD or the tenant roles, so every Memcached and its pods stay, and so do the rights of those who use them.
	KUBECONFIG=$(KUBECONFIG) kubectl delete -n $(NAMESPACE) -f deploy/networkpolicy.yaml -f deploy/pdb.yaml -f deploy/operator.yaml $(if $(filter cluster,$(SCOPE)),-f deploy/cluster/,-f deploy/rbac.yaml) -f deploy/sa.yaml --ignore-not-found

.PHONY: undeploy-crd
undeploy-crd: ## DELETES EVERY MEMCACHED IN THE CLUSTER, in every namespace, with their Deployments and pods: removes the CRD and the tenant roles.
	KUBECONFIG=$(KUBECONFIG) kubectl delete -f deploy/crd.yaml -f deploy/tenant-roles.yaml --ignore-not-found

.PHONY: olm-catalog
olm-catalog: ## Render the CSV for VERSION (replacing REPLACES) into deploy/olm-catalog.
	test/scripts/olm-catalog.sh "$(VERSION)" "$(REPLACES)"

##@ Test

.PHONY: test
test: no-demo verify vulncheck unit fuzz e2e ## Run everything CI runs: verify, the vulnerability check, unit tests, fuzz tests, then the end-to-end suites.

.PHONY: vulncheck
vulncheck: ## Fail on a vulnerability that the operator's binaries or the test module call and test/vuln/reviewed.yaml does not explain, or on a stale entry there (database: GOVULNDB, else https://vuln.go.dev).
	test/scripts/vulncheck.sh

# fuzz finds the fuzz tests with `go test -list`, so that one added to any package runs
# without a change here; `go test -fuzz` takes one test of one package at a time.
.PHONY: fuzz
fuzz: ## Run each fuzz test (Fuzz*) of the operator's module for FUZZTIME (20000x inputs), one at a time; a failing input is written to its package's testdata/fuzz, to commit with the fix.
	@tests="$$($(SHARED_ENV) go test $(SHARED_FLAGS) -list '^Fuzz' ./... | \
		awk '/^Fuzz/ { names[n++] = $$1; next } /^ok / { for (i = 0; i < n; i++) print $$2, names[i]; n = 0 }')"; \
	test -n "$$tests" || { echo "fuzz: go test -list '^Fuzz' found no fuzz test"; exit 1; }; \
	while read -r pkg name; do \
		echo "go test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) $$pkg"; \
		$(SHARED_ENV) go test $(SHARED_FLAGS) -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	done <<< "$$tests"

.PHONY: e2e
e2e: no-demo build tools ## Run the end-to-end suites (fake nodes, real node, image, OLM) against local clusters.
	@registry_was_up=false; test/scripts/registry.sh status && registry_was_up=true; \
	test/scripts/install-deps.sh test; \
	test/scripts/images.sh build; \
	rc=0; (cd test && $(SHARED_ENV) go test $(SHARED_FLAGS) -count=1 -timeout 40m -p $(E2E_PACKAGES) -parallel $(E2E_PARALLEL) -v ./...) || rc=$$?; \
	$$registry_was_up || test/scripts/registry.sh down; \
	exit $$rc

# no-demo stops `make test` and `make e2e` before they build anything while `make demo`
# is up: their suites start clusters, a real node and the registry of their own, and
# one real node runs per machine. It says to run `make demo-down`.
.PHONY: no-demo
no-demo:
	@test/scripts/demo.sh require-down

.PHONY: bench
bench: build tools ## Measure N Memcached resources (N=1000 SIZE=2 NAMESPACES=1) against N plain Deployments and against their children without the operator, the memory against the shipped limit, and the opening of a maintenance window shared by all (BENCH_WINDOW=0 leaves it out); writes tmp/_output/bench/result.json.
	cd test && BENCH_N=$(N) BENCH_SIZE=$(SIZE) BENCH_NAMESPACES=$(NAMESPACES) $(SHARED_ENV) go test $(SHARED_FLAGS) -run '^$$' -bench BenchmarkOperatorAgainstFloor -benchtime 1x -count 1 -timeout $(BENCH_TIMEOUT) ./e2e/

.PHONY: clean
clean: ## Remove build outputs (keeps the tool cache; see `make clean-tools`).
	rm -rf $(OUTPUT)/bin $(OUTPUT)/demo $(OUTPUT)/e2e $(OUTPUT)/gopath $(OUTPUT)/vulncheck

.PHONY: clean-images
clean-images: ## Stop the local registry and the private dockerd, and remove their images and buildah's storage.
	test/scripts/registry.sh down
	if [[ -d $(OUTPUT)/docker ]]; then test/scripts/dockerd.sh down; rm -rf $(OUTPUT)/docker; fi
	rm -rf $(OUTPUT)/registry $(OUTPUT)/images
	if [[ -d $(OUTPUT)/buildah ]]; then buildah --storage-driver=vfs --root $(OUTPUT)/buildah/root --runroot $(OUTPUT)/buildah/runroot rmi --all --force >/dev/null || true; rm -rf $(OUTPUT)/buildah; fi

.PHONY: clean-tools
clean-tools: ## Remove the cached Kubernetes, etcd, KWOK, OLM, operator-sdk, kube-score, govulncheck and kube-router binaries.
	rm -rf $(OUTPUT)/tools
