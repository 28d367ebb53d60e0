package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/example-inc/memcached-operator/test/framework"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// badInput is one malformed or unusual Memcached, and what must become of it:
// either kubectl reports a refusal that says why, and nothing is created, or
// the Memcached is accepted and the operator serves it.
type badInput struct {
	name string
	// object is the Memcached's name, "" when the API server generates it.
	object string
	// manifest is kubectl's standard input.
	manifest string
	// args are kubectl's arguments; apply -f - when nil.
	args []string
	// refused is a fragment of the refusal that says why; "" for an input
	// that must be accepted and served.
	refused string
	// size is what an accepted Memcached must converge on.
	size int
	// check, if set, checks more about an accepted Memcached.
	check func(t *testing.T, ns *namespace, name string)
}

// memcachedManifest returns a Memcached manifest named name, with body (its
// spec, status or stray fields) as given. The name is quoted, as a name of
// digits only must be in YAML.
func memcachedManifest(name, body string) string {
	return fmt.Sprintf("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: %q\n%s", name, body)
}

// Refusals of metadata.name by deploy/crd.yaml's rules and by the API server.
const (
	nameTooLong    = "must be no more than 63 characters: the operator puts the name in the memcached_cr label"
	nameHasDots    = "must not contain dots: the name is the name of the Memcached's Deployment"
	nameNotDNS1123 = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
)

// badInputs is the table of inputs that TestBadInput feeds the API server.
func badInputs() []badInput {
	refused := func(name, object, body, why string) badInput {
		return badInput{name: name, object: object, manifest: memcachedManifest(object, body), refused: why}
	}
	served := func(name, object, body string, size int) badInput {
		return badInput{name: name, object: object, manifest: memcachedManifest(object, body), size: size}
	}
	name63 := "n" + strings.Repeat("6", 61) + "n"
	generated := strings.Repeat("g", 70) + "-"
	return []badInput{
		// spec.size
		refused("size below 0", "negative", "spec:\n  size: -1\n", "spec.size in body should be greater than or equal to 0"),
		refused("size above 100", "too-big", "spec:\n  size: 101\n", "spec.size in body should be less than or equal to 100"),
		refused("size beyond int32", "huge", "spec:\n  size: 4294967296\n", "spec.size in body should be less than or equal to 100"),
		refused("size as a string", "string-size", "spec:\n  size: \"3\"\n", "spec.size in body must be of type integer"),
		refused("size with a fraction", "fraction", "spec:\n  size: 1.5\n", "spec.size in body must be of type int32"),
		refused("size as a boolean", "boolean", "spec:\n  size: true\n", "spec.size in body must be of type int32"),
		refused("size null", "null-size", "spec:\n  size: null\n", "spec.size: Required value"),
		refused("size missing", "no-size", "spec: {}\n", "spec.size: Required value"),
		served("size 0", "zero", "spec:\n  size: 0\n", 0),
		served("size written as 2.0", "two-point-zero", "spec:\n  size: 2.0\n", 2),
		// spec
		refused("spec missing", "no-spec", "", "spec: Required value"),
		refused("spec null", "null-spec", "spec: null\n", "spec: Required value"),
		refused("spec as a string", "string-spec", "spec: \"3\"\n", "spec in body must be of type object"),
		refused("spec as a list", "list-spec", "spec:\n  - size: 3\n", `unknown field "spec[0].size"`),
		// unknown fields: strict field validation, kubectl's default, refuses them;
		// otherwise the API server prunes them.
		refused("misspelt spec.Size", "misspelt", "spec:\n  Size: 3\n", `unknown field "spec.Size"`),
		refused("unknown field in spec", "unknown-in-spec", "spec:\n  size: 1\n  replicas: 3\n", `unknown field "spec.replicas"`),
		refused("size outside spec", "size-outside", "size: 3\nspec:\n  size: 1\n", `unknown field "size"`),
		{
			name: "unknown field without strict validation is pruned", object: "pruned",
			manifest: memcachedManifest("pruned", "spec:\n  size: 1\n  replicas: 3\n"),
			args:     []string{"apply", "--validate=false", "-f", "-"},
			size:     1, check: specHasOnlySize,
		},
		{
			name: "unknown field with --validate=warn is pruned", object: "warned",
			manifest: memcachedManifest("warned", "spec:\n  size: 1\n  replicas: 3\n"),
			args:     []string{"apply", "--validate=warn", "-f", "-"},
			size:     1, check: specHasOnlySize,
		},
		// status: only the status subresource writes it, so a create ignores it.
		served("status set on create is ignored", "with-status", "spec:\n  size: 1\nstatus:\n  nodes: [not-a-pod]\n  readyReplicas: 7\n", 1),
		served("status of the wrong shape on create is ignored", "bad-status", "spec:\n  size: 1\nstatus:\n  nodes: not-a-list\n", 1),
		// metadata.name: the Deployment is named after it and the memcached_cr
		// label holds it, so it must be a DNS label (deploy/crd.yaml).
		refused("name of 64 characters", strings.Repeat("a", 64), "spec:\n  size: 1\n", nameTooLong),
		refused("name of 253 characters", strings.Repeat("b", 253), "spec:\n  size: 1\n", nameTooLong),
		refused("name of 254 characters", strings.Repeat("c", 254), "spec:\n  size: 1\n", "must be no more than 253 characters"),
		refused("name with a dot", "my.cache", "spec:\n  size: 1\n", nameHasDots),
		refused("name with upper case", "MyCache", "spec:\n  size: 1\n", nameNotDNS1123),
		refused("name with an underscore", "my_cache", "spec:\n  size: 1\n", nameNotDNS1123),
		refused("name ending in a dash", "cache-", "spec:\n  size: 1\n", nameNotDNS1123),
		{
			name: "generateName with a dot", manifest: "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  generateName: my.cache-\nspec:\n  size: 1\n",
			args: []string{"create", "-f", "-"}, refused: nameHasDots,
		},
		served("name of 63 characters", name63, "spec:\n  size: 1\n", 1),
		served("name of digits only", "1234", "spec:\n  size: 1\n", 1),
		{
			name:     "generateName of 71 characters is cut to 63",
			manifest: "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  generateName: " + generated + "\nspec:\n  size: 1\n",
			args:     []string{"create", "-f", "-", "-o", "name"}, size: 1,
			check: func(t *testing.T, _ *namespace, name string) {
				if len(name) != 63 || !strings.HasPrefix(name, generated[:58]) {
					t.Errorf("generated name %q, want the first 58 characters of %q and 5 more", name, generated)
				}
			},
		},
		// spec.extraArgs: each item one memcached option that tunes the
		// cache, never one the operator sets (port, memory) nor one that
		// stops memcached from serving, nor two options in one item.
		refused("extraArgs with a short option", "short-option", "spec:\n  size: 1\n  extraArgs: [\"-p 1\"]\n", extraArgRefusedAt(0, `"-p 1"`)),
		refused("extraArgs setting the port", "port-arg", "spec:\n  size: 1\n  extraArgs: [\"--port=1\"]\n", extraArgRefusedAt(0, `"--port=1"`)),
		refused("extraArgs setting the memory", "memory-arg", "spec:\n  size: 1\n  extraArgs: [\"--memory-limit=10\"]\n", extraArgRefusedAt(0, `"--memory-limit=10"`)),
		refused("extraArgs daemonizing memcached", "daemon-arg", "spec:\n  size: 1\n  extraArgs: [\"--daemon\"]\n", extraArgRefusedAt(0, `"--daemon"`)),
		refused("two options in one extraArgs item", "two-in-one", "spec:\n  size: 1\n  extraArgs: [\"--conn-limit=1 --port=2\"]\n", extraArgRefusedAt(0, `"--conn-limit=1 --port=2"`)),
		refused("extraArgs value with a space", "value-space", "spec:\n  size: 1\n  extraArgs: [\"--extended=a b\"]\n", extraArgRefusedAt(0, `"--extended=a b"`)),
		refused("a bad extraArgs item after a good one", "second-arg", "spec:\n  size: 1\n  extraArgs: [\"--threads=2\", \"--port=1\"]\n", extraArgRefusedAt(1, `"--port=1"`)),
		{
			name: "allowed extraArgs go before the operator's options", object: "tuned",
			manifest: memcachedManifest("tuned", "spec:\n  size: 1\n  extraArgs: [\"--conn-limit=1024\", \"--threads=2\", \"--max-item-size=2m\", \"--disable-evictions\"]\n"),
			size:     1,
			check:    commandLineIs("memcached --conn-limit=1024 --threads=2 --max-item-size=2m --disable-evictions -m 64 -p 11211 -v"),
		},
		// spec.extraArgs values that memcached 1.6 exits on (checked with
		// Debian's memcached 1.6.18), alone and with each other.
		refused("threads 0", "no-threads", "spec:\n  size: 1\n  extraArgs: [\"--threads=0\"]\n", extraArgValueRefusedAt(0, `"--threads=0"`, "--threads must be a whole number from 1 to 64: memcached exits on 0")),
		refused("hashpower 40", "hashpower-40", "spec:\n  size: 1\n  extraArgs: [\"--extended=hashpower=40\"]\n", extraArgValueRefusedAt(0, `"--extended=hashpower=40"`, "--extended=hashpower must be a whole number from 12 to 32")),
		refused("protocol x", "protocol-x", "spec:\n  size: 1\n  extraArgs: [\"--protocol=x\"]\n", extraArgValueRefusedAt(0, `"--protocol=x"`, "--protocol must be auto, ascii or binary")),
		refused("conn limit 0", "no-conns", "spec:\n  size: 1\n  extraArgs: [\"--conn-limit=0\"]\n", extraArgValueRefusedAt(0, `"--conn-limit=0"`, "--conn-limit must be a whole number from 1 to 1048576")),
		refused("item size not a multiple of 512k", "item-768k", "spec:\n  size: 1\n  extraArgs: [\"--max-item-size=768k\"]\n", extraArgValueRefusedAt(0, `"--max-item-size=768k"`, "--max-item-size must be a multiple of 512k from 512k to 1024m")),
		refused("item size 64m with memoryMB 16", "item-64m", "spec:\n  size: 1\n  memoryMB: 16\n  extraArgs: [\"--max-item-size=64m\"]\n", "spec.extraArgs: Invalid value: --max-item-size (1m when not set) must be at most half of memcached's cache"),
		refused("memoryMB 1 with the default item size", "one-mb", "spec:\n  size: 1\n  memoryMB: 1\n", "spec.extraArgs: Invalid value: --max-item-size (1m when not set) must be at most half of memcached's cache"),
		refused("hashpower 12 with the default 4 threads", "hashpower-12", "spec:\n  size: 1\n  extraArgs: [\"--extended=hashpower=12\"]\n", "spec.extraArgs: Invalid value: --extended=hashpower must be above the power of memcached's item lock table"),
		refused("conn limit below 16 per thread", "few-conns", "spec:\n  size: 1\n  extraArgs: [\"--threads=8\", \"--conn-limit=100\"]\n", "spec.extraArgs: Invalid value: --conn-limit must be at least 16 per worker thread"),
		{
			name: "extraArgs at memcached's edges", object: "edges",
			manifest: memcachedManifest("edges", "spec:\n  size: 1\n  extraArgs: [\"--threads=64\", \"--conn-limit=1024\", \"--extended=hashpower=16\", \"--max-item-size=32m\", \"--protocol=ascii\"]\n"),
			size:     1,
			check:    commandLineIs("memcached --threads=64 --conn-limit=1024 --extended=hashpower=16 --max-item-size=32m --protocol=ascii -m 64 -p 11211 -v"),
		},
		// spec.resources and spec.memoryMB: memcached's memory must fit the
		// container's memory limit, or the kernel kills a full cache.
		refused("memory limit below 64Mi", "small-limit", "spec:\n  size: 1\n  resources:\n    limits:\n      memory: 32Mi\n", "spec.resources: Invalid value: limits.memory must be at least 64Mi"),
		refused("memoryMB 0", "zero-memory", "spec:\n  size: 1\n  memoryMB: 0\n", "spec.memoryMB in body should be greater than or equal to 1"),
		refused("memoryMB too big for the memory limit", "over-limit", "spec:\n  size: 1\n  memoryMB: 65\n  resources:\n    limits:\n      memory: 128Mi\n", memoryDoesNotFit),
		refused("memoryMB far too big for the memory limit", "far-over-limit", "spec:\n  size: 1\n  memoryMB: 1000\n  resources:\n    limits:\n      memory: 1Gi\n", memoryDoesNotFit),
		{
			name: "memoryMB that just fits the memory limit", object: "just-fits",
			manifest: memcachedManifest("just-fits", "spec:\n  size: 1\n  memoryMB: 64\n  resources:\n    limits:\n      memory: 128Mi\n"),
			size:     1,
			check:    commandLineIs("memcached -m 64 -p 11211 -v"),
		},
		// spec.image and spec.tolerations.
		refused("image with a space", "spaced-image", "spec:\n  size: 1\n  image: \"memcached 1.6\"\n", "spec.image in body should match"),
		refused("toleration operator Maybe", "maybe", "spec:\n  size: 1\n  tolerations:\n    - key: example.com/dedicated\n      operator: Maybe\n", `spec.tolerations[0].operator: Unsupported value: "Maybe"`),
		// Pod fields that the API server would refuse in the Deployment.
		refused("toleration Exists with a value", "exists-value", "spec:\n  size: 1\n  tolerations:\n    - {operator: Exists, value: x}\n", "spec.tolerations[0].value: Invalid value: value must be empty when operator is Exists: Exists matches any value of the key"),
		refused("toleration Equal without a key", "keyless-equal", "spec:\n  size: 1\n  tolerations:\n    - {operator: Equal, value: x}\n", "spec.tolerations[0].operator: Invalid value: operator must be Exists when key is empty"),
		refused("toleration key with a space", "toleration-key", "spec:\n  size: 1\n  tolerations:\n    - {key: \"bad key!\", operator: Exists}\n", "spec.tolerations[0].key: Invalid value: must be a qualified name, as taint keys are"),
		refused("toleration value with a space", "toleration-value", "spec:\n  size: 1\n  tolerations:\n    - {key: dedicated, value: \"a b\"}\n", "spec.tolerations[0].value: Invalid value: must be a label value, as taint values are"),
		refused("tolerationSeconds with NoSchedule", "toleration-seconds", "spec:\n  size: 1\n  tolerations:\n    - {key: dedicated, operator: Exists, effect: NoSchedule, tolerationSeconds: 30}\n", "spec.tolerations[0].effect: Invalid value: effect must be NoExecute when tolerationSeconds is set"),
		refused("nodeSelector key with a space", "selector-key", "spec:\n  size: 1\n  nodeSelector: {\"bad key!\": x}\n", "spec.nodeSelector: Invalid value: keys must be label keys"),
		refused("nodeSelector value with a space", "selector-value", "spec:\n  size: 1\n  nodeSelector: {disk: \"fast ssd\"}\n", "spec.nodeSelector: Invalid value: values must be label values"),
		refused("priorityClassName that is no DNS subdomain", "priority-name", "spec:\n  size: 1\n  priorityClassName: Not_A_DNS_Name\n", `spec.priorityClassName: Invalid value: "Not_A_DNS_Name": must be the name of a PriorityClass, a DNS subdomain`),
		// spec.tls, spec.auth and spec.monitoring: what memcached exits on or
		// a pod cannot name.
		refused("auth with the binary protocol", "auth-binary", "spec:\n  size: 1\n  auth: {secretName: users}\n  extraArgs: [\"--protocol=binary\"]\n", "spec.extraArgs: Invalid value: spec.auth needs --protocol=ascii or none"),
		refused("auth with the auto protocol", "auth-auto", "spec:\n  size: 1\n  auth: {secretName: users}\n  extraArgs: [\"--protocol=auto\"]\n", "spec.extraArgs: Invalid value: spec.auth needs --protocol=ascii or none"),
		refused("client certificates Optional", "tls-optional", "spec:\n  size: 1\n  tls: {secretName: cert, clientCertificates: Optional}\n", `spec.tls.clientCertificates: Unsupported value: "Optional"`),
		refused("TLS without a Secret", "tls-no-secret", "spec:\n  size: 1\n  tls: {clientCertificates: Required}\n", "spec.tls.secretName: Required value"),
		refused("TLS Secret that is no DNS subdomain", "tls-secret-name", "spec:\n  size: 1\n  tls: {secretName: Bad_Name}\n", `spec.tls.secretName: Invalid value: "Bad_Name": must be the name of a Secret`),
		refused("auth Secret that is no DNS subdomain", "auth-secret-name", "spec:\n  size: 1\n  auth: {secretName: Bad_Name}\n", `spec.auth.secretName: Invalid value: "Bad_Name": must be the name of a Secret`),
		refused("monitoring without enabled", "monitoring-empty", "spec:\n  size: 1\n  monitoring: {}\n", "spec.monitoring.enabled: Required value"),
		refused("discovery without enabled", "discovery-empty", "spec:\n  size: 1\n  discovery: {}\n", "spec.discovery.enabled: Required value"),
		{
			name: "TLS, auth and monitoring with the ASCII protocol", object: "secured",
			manifest: memcachedManifest("secured", "spec:\n  size: 1\n  tls: {secretName: cert, clientCertificates: Required}\n  auth: {secretName: users}\n  monitoring: {enabled: true}\n  extraArgs: [\"--protocol=ascii\"]\n"),
			size:     1,
			check:    commandLineIs("memcached --protocol=ascii -m 64 -p 11211 -v -Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2 -Y /etc/memcached/auth/passwords"),
		},
		{
			name: "every optional field set", object: "full",
			manifest: memcachedManifest("full", `spec:
  size: 2
  image: registry.example.com/e2e/memcached:full
  resources:
    requests: {cpu: 100m, memory: 200Mi}
    limits: {cpu: "1", memory: 512Mi}
  memoryMB: 300
  extraArgs: [--threads=4, --disable-flush-all]
  nodeSelector: {`+kwokNodeLabel+`: `+kwokNodeLabelValue+`}
  tolerations:
    - {key: example.com/dedicated, operator: Exists, effect: NoSchedule}
  priorityClassName: `+badInputPriorityClass+`
  maintenanceWindow: {day: Sunday, start: "03:00", duration: 1h30m}
`),
			size:  2,
			check: fullSpecServed,
		},
		// spec.maintenanceWindow: a weekday, a time of day and 1h to 24h.
		refused("maintenance window on no weekday", "window-day", "spec:\n  size: 1\n  maintenanceWindow: {day: Sun, start: \"03:00\", duration: 2h}\n", `spec.maintenanceWindow.day: Unsupported value: "Sun"`),
		refused("maintenance window at 3:00", "window-start", "spec:\n  size: 1\n  maintenanceWindow: {day: Sunday, start: \"3:00\", duration: 2h}\n", "spec.maintenanceWindow.start in body should match"),
		refused("maintenance window of 30m", "window-short", "spec:\n  size: 1\n  maintenanceWindow: {day: Sunday, start: \"03:00\", duration: 30m}\n", `spec.maintenanceWindow.duration: Invalid value: "30m": must be from 1h to 24h`),
		refused("maintenance window without a duration", "window-open-ended", "spec:\n  size: 1\n  maintenanceWindow: {day: Sunday, start: \"03:00\"}\n", "spec.maintenanceWindow.duration: Required value"),
		// The kind and version.
		{
			name: "unserved version", object: "v1-cache",
			manifest: "apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata:\n  name: v1-cache\nspec:\n  size: 1\n",
			refused:  `no matches for kind "Memcached" in version "cache.example.com/v1"`,
		},
	}
}

// extraArgRefusedAt is the refusal of extraArgs item i, quoted, when it is
// not one of the options the CRD allows.
func extraArgRefusedAt(i int, quoted string) string {
	return fmt.Sprintf("spec.extraArgs[%d]: Invalid value: %s: must be one of the memcached options that spec.extraArgs allows", i, quoted)
}

// extraArgValueRefusedAt is the refusal of extraArgs item i, quoted, whose
// value memcached would exit on, for why.
func extraArgValueRefusedAt(i int, quoted, why string) string {
	return fmt.Sprintf("spec.extraArgs[%d]: Invalid value: %s: %s", i, quoted, why)
}

// memoryDoesNotFit is the refusal of a spec.memoryMB that, with what
// memcached needs besides its cache, exceeds the container's memory limit.
const memoryDoesNotFit = "spec.memoryMB: Invalid value: does not fit the memory limit"

// badInputPriorityClass is the PriorityClass that TestBadInput creates for
// the Memcached that sets every optional field: pods that name a missing one
// are refused at admission.
const badInputPriorityClass = "memcached-e2e-bad-input"

// commandLineIs returns a check that the memcached container of an accepted
// Memcached's Deployment runs command.
func commandLineIs(command string) func(t *testing.T, ns *namespace, name string) {
	return func(t *testing.T, ns *namespace, name string) {
		d, err := ns.deployment(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := memcachedContainer(d.Spec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := commandIs(c, command); err != nil {
			t.Error(err)
		}
	}
}

// fullSpecServed fails unless every optional field of Memcached name, as
// badInputs sets them, is in its Deployment's pod template.
func fullSpecServed(t *testing.T, ns *namespace, name string) {
	d, err := ns.deployment(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Spec.Template.Spec
	c, err := memcachedContainer(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := "registry.example.com/e2e/memcached:full"; c.Image != want {
		t.Errorf("image = %q, want %q", c.Image, want)
	}
	if err := commandIs(c, "memcached --threads=4 --disable-flush-all -m 300 -p 11211 -v"); err != nil {
		t.Error(err)
	}
	if want := map[string]string{"cpu": "100m", "memory": "200Mi"}; !maps.Equal(c.Resources.Requests, want) {
		t.Errorf("resources.requests = %v, want %v", c.Resources.Requests, want)
	}
	if want := map[string]string{"cpu": "1", "memory": "512Mi"}; !maps.Equal(c.Resources.Limits, want) {
		t.Errorf("resources.limits = %v, want %v", c.Resources.Limits, want)
	}
	if want := map[string]string{kwokNodeLabel: kwokNodeLabelValue}; !maps.Equal(s.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v", s.NodeSelector, want)
	}
	if want := []toleration{{Key: "example.com/dedicated", Operator: "Exists", Effect: "NoSchedule"}}; !reflect.DeepEqual(s.Tolerations, want) {
		t.Errorf("tolerations = %+v, want %+v", s.Tolerations, want)
	}
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = %v, want false: memcached needs no token", s.AutomountServiceAccountToken)
	}
	if s.PriorityClassName != badInputPriorityClass {
		t.Errorf("priorityClassName = %q, want %q", s.PriorityClassName, badInputPriorityClass)
	}
}

// specHasOnlySize fails unless Memcached name's spec holds size alone: the
// API server pruned the fields the schema does not declare.
func specHasOnlySize(t *testing.T, ns *namespace, name string) {
	var m struct{ Spec map[string]any }
	if err := ns.kubectl.GetJSON(context.Background(), &m, "memcached", name); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec) != 1 || m.Spec["size"] == nil {
		t.Errorf("spec = %v, want size alone: undeclared fields are pruned", m.Spec)
	}
}

// TestBadInput feeds the API server Memcached resources that are malformed or
// at the edge of what the operator can serve: wrong types, sizes out of
// range, missing or null spec, unknown fields, status on create, names
// that cannot name a Deployment or a label value, memcached options that
// would break its command line or that memcached exits on, memory that does
// not fit its limit, and tolerations, node selectors and priority class
// names that the API server would refuse in the Deployment's pods. Each is either refused,
// with a message that says why, or accepted and served: its Deployment and
// pods converge. Writes to an existing Memcached are checked the same way.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, slug(t.Name()))
	ns.startOperator()
	ctx := context.Background()
	if _, err := cluster.Kubectl().RunWithInput(ctx, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: `+badInputPriorityClass+`
value: 1000
preemptionPolicy: Never
description: memcached pods of TestBadInput
`, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Kubectl().Run(context.Background(), "delete", "priorityclass", badInputPriorityClass, "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Every input and the writes have objects of their own, so they run in
	// parallel; the group returns once all of them have, and the count of
	// what was accepted comes after.
	var accepted atomic.Int32
	t.Run("inputs", func(t *testing.T) {
		for _, c := range badInputs() {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ns := ns.withT(t)
				args := c.args
				if args == nil {
					args = []string{"apply", "-f", "-"}
				}
				out, err := ns.kubectl.RunWithInput(ctx, c.manifest, args...)
				if c.refused != "" {
					checkRefused(t, err, c.refused)
					if c.object != "" && ns.exists("memcached", c.object) {
						t.Errorf("memcached %s exists, want it refused", c.object)
					}
					return
				}
				if err != nil {
					t.Fatalf("want it accepted: %v", err)
				}
				accepted.Add(1)
				name := c.object
				if name == "" {
					name = strings.TrimPrefix(strings.TrimSpace(out), "memcached.cache.example.com/")
				}
				ns.waitConverged(name, c.size)
				if c.check != nil {
					c.check(t, ns, name)
				}
			})
		}

		t.Run("writes to an existing Memcached", func(t *testing.T) {
			t.Parallel()
			ns := ns.withT(t)
			ns.createMemcached("target", 1)
			before := ns.waitConverged("target", 1)
			accepted.Add(1)
			for _, w := range []struct {
				name    string
				args    []string
				refused string
			}{
				{"kubectl scale above 100 is refused", []string{"scale", "memcached/target", "--replicas=101"}, "spec.size in body should be less than or equal to 100"},
				{"a patch of size below 0 is refused", []string{"patch", "memcached", "target", "--type=merge", "-p", `{"spec":{"size":-1}}`}, "spec.size in body should be greater than or equal to 0"},
				{"a patch of spec to null is refused", []string{"patch", "memcached", "target", "--type=merge", "-p", `{"spec":null}`}, "spec: Required value"},
				{"a patch of threads to 0 is refused", []string{"patch", "memcached", "target", "--type=merge", "-p", `{"spec":{"extraArgs":["--threads=0"]}}`}, extraArgValueRefusedAt(0, `"--threads=0"`, "--threads must be")},
				{"a patch of a keyless Equal toleration is refused", []string{"patch", "memcached", "target", "--type=merge", "-p", `{"spec":{"tolerations":[{"operator":"Equal","value":"x"}]}}`}, "operator must be Exists when key is empty"},
				{"status written through the resource itself is ignored", []string{"patch", "memcached", "target", "--type=merge", "-p", `{"status":{"nodes":["not-a-pod"],"readyReplicas":7}}`}, ""},
			} {
				t.Run(w.name, func(t *testing.T) {
					ns := ns.withT(t)
					_, err := ns.kubectl.Run(ctx, w.args...)
					if w.refused != "" {
						checkRefused(t, err, w.refused)
					} else if err != nil {
						t.Fatal(err)
					}
					o := ns.waitConverged("target", 1)
					if o.Memcached.Metadata.Generation != before.Memcached.Metadata.Generation {
						t.Errorf("generation %d, want %d: the spec changed", o.Memcached.Metadata.Generation, before.Memcached.Metadata.Generation)
					}
				})
			}
		})
	})

	t.Run("only the accepted inputs exist", func(t *testing.T) {
		out := ns.withT(t).run("get", "memcacheds", "-o", "name")
		if got := len(strings.Fields(out)); got != int(accepted.Load()) {
			t.Errorf("%d Memcached resources exist, want the %d accepted: %s", got, accepted.Load(), out)
		}
	})
}

// checkRefused fails t unless err is a kubectl refusal whose message holds why.
func checkRefused(t *testing.T, err error, why string) {
	t.Helper()
	var ce *framework.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want kubectl to report a refusal containing %q", err, why)
	}
	if !strings.Contains(ce.Stderr, why) {
		t.Errorf("refusal %q does not say %q", ce.Stderr, why)
	}
	t.Logf("refused: %s", ce.Stderr)
}

// withT returns a copy of ns whose helpers fail t, a subtest of ns's test.
func (ns *namespace) withT(t testing.TB) *namespace {
	c := *ns
	c.t = t
	return &c
}

// exists reports whether the object kind/name exists in the namespace.
func (ns *namespace) exists(kind, name string) bool {
	ns.t.Helper()
	return strings.TrimSpace(ns.run("get", kind, name, "--ignore-not-found", "-o", "name")) != ""
}

// TestSpecStoredBeforeTheRules: a Memcached stored while the CRD did not
// yet have today's rules on the spec, as after an upgrade of the CRD, is
// not served. The operator's own check (memcached.ValidateSpec) makes it
// Degraded=True InvalidSpec with a Warning Event and creates no
// Deployment; the API server still takes that status, since the spec it
// would now refuse is unchanged; and once the spec is fixed the Memcached
// converges.
//
// It runs serially: for a while the cluster's only Memcached CRD has no
// rules, which other tests' refusals rely on.
func TestSpecStoredBeforeTheRules(t *testing.T) {
	ns := newNamespace(t, slug(t.Name()))
	ctx := context.Background()
	admin := cluster.Kubectl()
	current, err := os.ReadFile(paths.Deploy("crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	older, err := withoutSpecRules(current)
	if err != nil {
		t.Fatal(err)
	}
	probe := memcachedManifest("probe", "spec:\n  size: 1\n  extraArgs: [\"--threads=0\"]\n")
	// restore applies the current CRD and waits until the API server
	// refuses the old spec again.
	restore := func(ctx context.Context) error {
		if _, err := admin.Run(ctx, "apply", "-f", paths.Deploy("crd.yaml")); err != nil {
			return err
		}
		return framework.Eventually(ctx, convergeTimeout, "the current CRD to refuse the same spec", func(ctx context.Context) error {
			if _, err := ns.kubectl.RunWithInput(ctx, probe, "create", "--dry-run=server", "-f", "-"); err == nil {
				return errors.New("accepted")
			}
			return nil
		})
	}
	// Every later test needs the current CRD, the parallel ones its rules
	// in force as soon as they start.
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Errorf("cleanup: restore the CRD: %v", err)
		}
	})
	if _, err := admin.RunWithInput(ctx, string(older), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	stored := memcachedManifest("stored", "spec:\n  size: 1\n  extraArgs: [\"--threads=0\"]\n")
	ns.eventually("the CRD without the spec's rules to take the old spec", func(ctx context.Context) error {
		_, err := ns.kubectl.RunWithInput(ctx, stored, "create", "-f", "-")
		return err
	})
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}

	ns.startOperator()
	const why = `spec.extraArgs[0]: "--threads=0": --threads must be a whole number from 1 to 64`
	ns.waitDegradedWarning("stored", "InvalidSpec", why)
	o, err := framework.Observe(context.Background(), ns.kubectl, "stored")
	if err != nil {
		t.Fatal(err)
	}
	if o.Deployment != nil || len(o.Pods) != 0 {
		t.Errorf("deployment %v and pods %v, want none for an invalid spec", o.Deployment != nil, o.PodNames())
	}

	ns.run("patch", "memcached", "stored", "--type=merge", "-p", `{"spec":{"extraArgs":["--threads=2"]}}`)
	ns.waitConverged("stored", 1)
}

// withoutSpecRules returns the CRD manifest crd with no CEL rules under
// spec, as a CRD of before those rules would be.
func withoutSpecRules(crd []byte) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(crd, &obj); err != nil {
		return nil, err
	}
	versions, _, err := unstructured.NestedSlice(obj, "spec", "versions")
	if err != nil || len(versions) != 1 {
		return nil, fmt.Errorf("the CRD has %d versions (%v), want 1", len(versions), err)
	}
	spec, found, err := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec")
	if err != nil || !found {
		return nil, fmt.Errorf("the CRD has no spec schema: %v", err)
	}
	dropRules(spec)
	if err := unstructured.SetNestedMap(versions[0].(map[string]any), spec, "schema", "openAPIV3Schema", "properties", "spec"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedSlice(obj, versions, "spec", "versions"); err != nil {
		return nil, err
	}
	return yaml.Marshal(obj)
}

// dropRules removes every x-kubernetes-validations from the schema s and the
// schemas within it.
func dropRules(s any) {
	switch v := s.(type) {
	case map[string]any:
		delete(v, "x-kubernetes-validations")
		for _, e := range v {
			dropRules(e)
		}
	case []any:
		for _, e := range v {
			dropRules(e)
		}
	}
}
