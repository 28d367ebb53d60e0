// Package crd checks deploy/crd.yaml offline, with the API server's own
// validation code: that its CEL rules fit the API server's cost budget,
// and that they refuse and accept what the operator's Go check
// (pkg/memcached/spec.go) does. TestBadInput checks the same against a real API
// server, slower.
package crd

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// loadCRD returns deploy/crd.yaml in the API server's internal form.
func loadCRD(t *testing.T) *apiextensions.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &v1); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensions.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var crd apiextensions.CustomResourceDefinition
	if err := scheme.Convert(&v1, &crd, nil); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// TestCRDIsValid runs the API server's validation of a new CRD, which
// compiles every rule and refuses rules whose estimated cost exceeds the
// budget, per rule and for the whole schema.
func TestCRDIsValid(t *testing.T) {
	crd := loadCRD(t)
	crd.Status.StoredVersions = []string{"v1alpha1"} // the API server sets it
	for _, err := range validation.ValidateCustomResourceDefinition(context.Background(), crd) {
		t.Error(err)
	}
}

// TestRules feeds specs to the CRD's CEL rules. want is a fragment of the
// refusal, "" for a spec the rules accept. Each case is one of
// TestValidateSpec's in pkg/memcached, so the CRD and the operator's check agree.
func TestRules(t *testing.T) {
	crd := loadCRD(t)
	schema, err := structuralschema.NewStructural(crd.Spec.Validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	validator := cel.NewValidator(schema, true, celconfig.PerCallLimit)
	tests := []struct {
		name string
		spec string
		want string
	}{
		{"threads 0", `extraArgs: ["--threads=0"]`, `spec.extraArgs[0]: Invalid value: "--threads=0": --threads must be a whole number from 1 to 64`},
		{"threads 1 and 64", `extraArgs: ["--threads=1", "--threads=64"]`, ""},
		{"threads 65", `extraArgs: ["--threads=65"]`, "--threads must be"},
		{"threads with a unit", `extraArgs: ["--threads=4x"]`, "--threads must be"},
		{"every protocol", `extraArgs: ["--protocol=auto", "--protocol=ascii", "--protocol=binary"]`, ""},
		{"protocol x", `extraArgs: ["--protocol=x"]`, `spec.extraArgs[0]: Invalid value: "--protocol=x": --protocol must be auto, ascii or binary`},
		{"conn limit 0", `extraArgs: ["--conn-limit=0"]`, "--conn-limit must be a whole number from 1 to 1048576"},
		{"conn limit at its maximum", `extraArgs: ["--conn-limit=1048576"]`, ""},
		{"conn limit above its maximum", `extraArgs: ["--conn-limit=1048577"]`, "--conn-limit must be a whole number"},
		{"conn limit of 16 per default thread", `extraArgs: ["--conn-limit=64"]`, ""},
		{"conn limit below 16 per default thread", `extraArgs: ["--conn-limit=63"]`, "spec.extraArgs: Invalid value: --conn-limit must be at least 16 per worker thread"},
		{"conn limit of 16 per thread", `extraArgs: ["--threads=2", "--conn-limit=32"]`, ""},
		{"conn limit of 16 with 1 thread, below 32", `extraArgs: ["--threads=1", "--conn-limit=31"]`, "and at least 32"},
		{"conn limit below 16 per thread", `extraArgs: ["--conn-limit=1000", "--threads=64"]`, "at least 16 per worker thread"},
		{"hashpower 40", `extraArgs: ["--extended=hashpower=40"]`, `spec.extraArgs[0]: Invalid value: "--extended=hashpower=40": --extended=hashpower must be a whole number from 12 to 32`},
		{"hashpower 11", `extraArgs: ["--extended=hashpower=11"]`, "from 12 to 32"},
		{"hashpower without a number", `extraArgs: ["--extended=no_lru_crawler,hashpower"]`, "from 12 to 32"},
		{"a bad hashpower after a good one", `extraArgs: ["--extended=hashpower=20,hashpower=33"]`, "from 12 to 32"},
		{"hashpower 32", `extraArgs: ["--extended=hashpower=32"]`, ""},
		{"hashpower 12 with 3 threads", `extraArgs: ["--threads=3", "--extended=hashpower=12"]`, ""},
		{"hashpower 12 with the default 4 threads", `extraArgs: ["--extended=hashpower=12"]`, "spec.extraArgs: Invalid value: --extended=hashpower must be above the power of memcached's item lock table"},
		{"hashpower 13 with 4 threads", `extraArgs: ["--threads=4", "--extended=hashpower=13"]`, ""},
		{"hashpower 13 with 5 threads", `extraArgs: ["--threads=5", "--extended=hashpower=13"]`, "item lock table"},
		{"hashpower 14 with 10 threads", `extraArgs: ["--threads=10", "--extended=hashpower=14"]`, ""},
		{"hashpower 14 with 11 threads", `extraArgs: ["--threads=11", "--extended=hashpower=14"]`, "item lock table"},
		{"hashpower 15 with 20 threads", `extraArgs: ["--threads=20", "--extended=hashpower=15"]`, ""},
		{"hashpower 15 with 21 threads", `extraArgs: ["--threads=21", "--extended=hashpower=15"]`, "item lock table"},
		{"hashpower 16 with 64 threads", `extraArgs: ["--extended=hashpower=16", "--threads=64"]`, ""},
		{"item size in KiB, MiB and bytes", `extraArgs: ["--max-item-size=512k", "--max-item-size=2M", "--max-item-size=1572864"]`, ""},
		{"item size below a slab chunk", `extraArgs: ["--max-item-size=511k"]`, "--max-item-size must be a multiple of 512k"},
		{"item size not a multiple of a slab chunk", `extraArgs: ["--max-item-size=768k"]`, "--max-item-size must be a multiple of 512k"},
		{"item size with a fraction", `extraArgs: ["--max-item-size=1.5m"]`, "--max-item-size must be a multiple of 512k"},
		{"item size in GiB", `extraArgs: ["--max-item-size=1g"]`, "--max-item-size must be a multiple of 512k"},
		{"item size of 1024m", "extraArgs: [\"--max-item-size=1024m\"]\nresources: {limits: {memory: 3Gi}}", ""},
		{"item size above 1024m", "extraArgs: [\"--max-item-size=1025m\"]\nresources: {limits: {memory: 3Gi}}", "--max-item-size must be a multiple of 512k"},
		{"item size 64m with memoryMB 16", "extraArgs: [\"--max-item-size=64m\"]\nmemoryMB: 16", "spec.extraArgs: Invalid value: --max-item-size (1m when not set) must be at most half of memcached's cache"},
		{"item size half of memoryMB 16", "extraArgs: [\"--max-item-size=8m\"]\nmemoryMB: 16", ""},
		{"item size above half of memoryMB 16", "extraArgs: [\"--max-item-size=8704k\"]\nmemoryMB: 16", "at most half of memcached's cache"},
		{"item size above half of the derived cache", `extraArgs: ["--max-item-size=33m"]`, "at most half of memcached's cache"},
		{"item size half of the derived cache", `extraArgs: ["--max-item-size=32m"]`, ""},
		{"default item size with memoryMB 1", "memoryMB: 1", "at most half of memcached's cache"},
		{"small item size with memoryMB 1", "extraArgs: [\"--max-item-size=512k\"]\nmemoryMB: 1", ""},
		{"growth factor above 1", `extraArgs: ["--slab-growth-factor=1.01", "--slab-growth-factor=2"]`, ""},
		{"growth factor 0.5", `extraArgs: ["--slab-growth-factor=0.5"]`, `spec.extraArgs[0]: Invalid value: "--slab-growth-factor=0.5": --slab-growth-factor must be a decimal number above 1`},
		{"growth factor 1", `extraArgs: ["--slab-growth-factor=1.0"]`, "--slab-growth-factor must be"},
		{"growth factor with letters", `extraArgs: ["--slab-growth-factor=2x"]`, "--slab-growth-factor must be"},
		{"slab min size 0", `extraArgs: ["--slab-min-size=0"]`, "--slab-min-size must be a whole number from 1 to 2147483647"},
		{"slab min size at its maximum", `extraArgs: ["--slab-min-size=2147483647"]`, ""},
		{"slab min size above its maximum", `extraArgs: ["--slab-min-size=2147483648"]`, "--slab-min-size must be"},
		{"requests per event 0", `extraArgs: ["--max-reqs-per-event=0"]`, "--max-reqs-per-event must be a whole number from 1"},
		{"requests per event 1", `extraArgs: ["--max-reqs-per-event=1"]`, ""},
		{"negative requests per event", `extraArgs: ["--max-reqs-per-event=-1"]`, "--max-reqs-per-event must be"},
		{"listen backlog 0", `extraArgs: ["--listen-backlog=0"]`, ""},
		{"listen backlog above int32", `extraArgs: ["--listen-backlog=2147483648"]`, "--listen-backlog must be a whole number from 0"},
		{"extended suboptions of the allow-list", `extraArgs: ["--extended=hash_algorithm=xxh3,idle_timeout=2147483647,lru_crawler_tocrawl=4294967295,lru_crawler_sleep=1000000,track_sizes,slab_automove=2,hashpower=20"]`, ""},
		{"extended foo", `extraArgs: ["--extended=foo"]`, `spec.extraArgs[0]: Invalid value: "--extended=foo": --extended must be a comma-separated list of`},
		{"extended suboption the operator sets", `extraArgs: ["--extended=ssl_verify_mode=0"]`, "--extended must be"},
		{"extended sleep above a second", `extraArgs: ["--extended=lru_crawler_sleep=1000001"]`, "--extended must be"},
		{"extended flag with a value", `extraArgs: ["--extended=track_sizes=1"]`, "--extended must be"},
		{"extended trailing comma", `extraArgs: ["--extended=track_sizes,"]`, "--extended must be"},
		{"memoryMB 64 with the default limit", "memoryMB: 64", ""},
		{"memoryMB 96 with the default limit", "memoryMB: 96", "spec.memoryMB: Invalid value: does not fit the memory limit (128Mi when spec.resources is not set)"},
		{"memoryMB 96 without a memory limit", "memoryMB: 96\nresources: {requests: {cpu: 100m}}", ""},
		{"tolerations the API server accepts", `tolerations: [{operator: Exists}, {key: example.com/dedicated, operator: Equal, value: cache, effect: NoSchedule},
  {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}, {key: dedicated, value: cache}]`, ""},
		{"Exists with a value", `tolerations: [{operator: Exists, value: x}]`, "spec.tolerations[0].value: Invalid value: value must be empty when operator is Exists"},
		{"keyless Equal", `tolerations: [{operator: Equal, value: x}]`, "spec.tolerations[0].operator: Invalid value: operator must be Exists when key is empty"},
		{"keyless without an operator", `tolerations: [{effect: NoSchedule}]`, "operator must be Exists when key is empty"},
		{"key that is no qualified name", `tolerations: [{key: "bad key!", operator: Exists}]`, "spec.tolerations[0].key: Invalid value: must be a qualified name"},
		{"value that is no label value", `tolerations: [{key: a, value: "not a value"}]`, "spec.tolerations[0].value: Invalid value: must be a label value"},
		{"tolerationSeconds with NoSchedule", `tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 30}]`, "spec.tolerations[0].effect: Invalid value: effect must be NoExecute when tolerationSeconds is set"},
		{"node selector of label keys and values", `nodeSelector: {kubernetes.io/os: linux, disk: ""}`, ""},
		{"node selector key with a space", `nodeSelector: {"bad key!": x}`, "spec.nodeSelector: Invalid value: keys must be label keys"},
		{"node selector value with a space", `nodeSelector: {disk: "fast ssd"}`, "spec.nodeSelector: Invalid value: values must be label values"},
		{"monitoring labels of label keys and values", `monitoring: {enabled: true, labels: {release: kube-prometheus-stack, example.com/team: ""}}`, ""},
		{"monitoring label key with a space", `monitoring: {enabled: true, labels: {"bad key!": x}}`, "spec.monitoring.labels: Invalid value: keys must be label keys"},
		{"monitoring label value with a space", `monitoring: {enabled: true, labels: {release: "kube prometheus"}}`, "spec.monitoring.labels: Invalid value: values must be label values"},
		{"monitoring label app", `monitoring: {enabled: true, labels: {app: other}}`, "spec.monitoring.labels: Invalid value: app and memcached_cr are the operator's own labels"},
		{"monitoring label memcached_cr", `monitoring: {enabled: true, labels: {memcached_cr: other}}`, "app and memcached_cr are the operator's own labels"},
		{"priority class", `priorityClassName: high-priority.example.com`, ""},
		{"priority class that is no DNS subdomain", `priorityClassName: Not_A_DNS_Name`, `spec.priorityClassName: Invalid value: "Not_A_DNS_Name": must be the name of a PriorityClass, a DNS subdomain`},
		{"auth with the ASCII protocol", "auth: {secretName: passwords}\nextraArgs: [\"--protocol=ascii\"]", ""},
		{"auth with the binary protocol", "auth: {secretName: passwords}\nextraArgs: [\"--protocol=binary\"]", "spec.extraArgs: Invalid value: spec.auth needs --protocol=ascii or none"},
		{"auth with the auto protocol", "auth: {secretName: passwords}\nextraArgs: [\"--protocol=auto\"]", "spec.auth needs --protocol=ascii or none"},
		{"binary protocol without auth", `extraArgs: ["--protocol=binary"]`, ""},
		{"TLS with client certificates", `tls: {secretName: memcached-tls, clientCertificates: Required}`, ""},
		{"TLS Secret that is no DNS subdomain", `tls: {secretName: Bad_Name}`, `spec.tls.secretName: Invalid value: "Bad_Name": must be the name of a Secret`},
		{"maintenance window", `maintenanceWindow: {day: Sunday, start: "03:00", duration: 2h}`, ""},
		{"maintenance window in hours and minutes", `maintenanceWindow: {day: Saturday, start: "23:30", duration: 1h30m}`, ""},
		{"maintenance window of 60m", `maintenanceWindow: {day: Monday, start: "00:00", duration: 60m}`, ""},
		{"maintenance window of a day", `maintenanceWindow: {day: Monday, start: "00:00", duration: 24h}`, ""},
		{"maintenance window of 25h", `maintenanceWindow: {day: Sunday, start: "03:00", duration: 25h}`, "spec.maintenanceWindow.duration: Invalid value: \"25h\": must be from 1h to 24h in hours and minutes"},
		{"maintenance window of 59m", `maintenanceWindow: {day: Sunday, start: "03:00", duration: 59m}`, "must be from 1h to 24h"},
		{"maintenance window with seconds", `maintenanceWindow: {day: Sunday, start: "03:00", duration: 1h30s}`, "must be from 1h to 24h"},
		{"maintenance window in days", `maintenanceWindow: {day: Sunday, start: "03:00", duration: 1d}`, "must be from 1h to 24h"},
		{"auth Secret that is no DNS subdomain", `auth: {secretName: Bad_Name}`, `spec.auth.secretName: Invalid value: "Bad_Name": must be the name of a Secret`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := memcachedWithSpec(t, tt.spec)
			errs, _ := validator.Validate(context.Background(), field.NewPath(""), schema, obj, nil, math.MaxInt64)
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, strings.TrimPrefix(err.Error(), "[]."))
			}
			got := strings.Join(msgs, "\n")
			if !checkRefusal(t, got, tt.want) && len(errs) > 1 {
				t.Errorf("got %d refusals, want one:\n%s", len(errs), got)
			}
		})
	}
}

// TestSchema feeds specs to the CRD's OpenAPI schema, which checks types
// and required fields before any CEL rule runs: want is a fragment of the
// refusal, "" for a spec it accepts.
func TestSchema(t *testing.T) {
	crd := loadCRD(t)
	validator, _, err := apiservervalidation.NewSchemaValidator(crd.Spec.Validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec string
		want string
	}{
		{"discovery", `discovery: {enabled: true}`, ""},
		{"discovery off", `discovery: {enabled: false}`, ""},
		{"discovery with TLS and auth", "discovery: {enabled: true}\ntls: {secretName: cert}\nauth: {secretName: users}", ""},
		{"discovery without enabled", `discovery: {}`, "spec.discovery.enabled: Required value"},
		{"discovery enabled as a string", `discovery: {enabled: "yes"}`, `spec.discovery.enabled: Invalid value: "string": spec.discovery.enabled in body must be of type boolean`},
		{"discovery as a boolean", `discovery: true`, "spec.discovery: Invalid value"},
		{"network policy", `networkPolicy: {enabled: true}`, ""},
		{"network policy with peers", "networkPolicy:\n  enabled: true\n  from:\n  - podSelector: {matchLabels: {role: web}}\n  - namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [a, b]}]}\n    podSelector: {}\n  monitoringFrom:\n  - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}", ""},
		{"network policy without enabled", `networkPolicy: {from: [{podSelector: {}}]}`, "spec.networkPolicy.enabled: Required value"},
		{"network policy of an empty peer", `networkPolicy: {enabled: true, from: [{}]}`, "spec.networkPolicy.from[0]: Invalid value"},
		{"network policy of an ipBlock without cidr", `networkPolicy: {enabled: true, monitoringFrom: [{ipBlock: {except: [10.1.0.0/16]}}]}`, "spec.networkPolicy.monitoringFrom[0].ipBlock.cidr: Required value"},
		{"network policy of an unknown operator", `networkPolicy: {enabled: true, from: [{podSelector: {matchExpressions: [{key: a, operator: Is}]}}]}`, "spec.networkPolicy.from[0].podSelector.matchExpressions[0].operator: Unsupported value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := memcachedWithSpec(t, tt.spec)
			var msgs []string
			for _, err := range apiservervalidation.ValidateCustomResource(nil, obj, validator) {
				msgs = append(msgs, err.Error())
			}
			checkRefusal(t, strings.Join(msgs, "\n"), tt.want)
		})
	}
}

// memcachedWithSpec returns the Memcached example, whose spec is size 1
// and the YAML spec, with whole numbers decoded as the API server decodes
// them.
func memcachedWithSpec(t *testing.T, spec string) map[string]interface{} {
	t.Helper()
	var s map[string]interface{}
	if err := yaml.Unmarshal([]byte("size: 1\n"+spec), &s); err != nil {
		t.Fatal(err)
	}
	return map[string]interface{}{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]interface{}{"name": "example"},
		"spec":     integers(s),
	}
}

// checkRefusal fails t when got, the refusals joined by newlines, is not
// empty where want is empty, or does not contain want; it returns whether
// it did.
func checkRefusal(t *testing.T, got, want string) bool {
	t.Helper()
	switch {
	case want == "" && got != "":
		t.Errorf("refused:\n%s\nwant it accepted", got)
	case want != "" && !strings.Contains(got, want):
		t.Errorf("got %q, want a refusal containing %q", got, want)
	default:
		return false
	}
	return true
}

// integers turns the whole numbers that JSON decoding made float64 into
// int64, as the API server decodes them.
func integers(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = integers(e)
		}
	case []interface{}:
		for i, e := range x {
			x[i] = integers(e)
		}
	case float64:
		if x == math.Trunc(x) {
			return int64(x)
		}
	}
	return v
}
