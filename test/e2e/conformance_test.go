package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/example-inc/memcached-operator/test/framework"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// conformanceCase is one case of pkg/memcached's conformance corpus
// (TestConformanceCorpus there generates it from the allow-list of
// spec.extraArgs and writes what the operator makes of each spec).
type conformanceCase struct {
	Name        string            `json:"name"`
	Spec        map[string]any    `json:"spec"`
	Command     []string          `json:"command"`
	MemoryLimit int64             `json:"memoryLimit"`
	Settings    map[string]string `json:"settings"`
	Invalid     string            `json:"invalid"`
	Policy      string            `json:"policy"`
}

// conformanceVerdict is what memcached, the API server and the operator's
// Go check made of one case.
type conformanceVerdict struct {
	c         conformanceCase
	served    bool
	why       string
	peak      int64
	accepted  bool
	refusal   string
	nodeLimit string
}

// TestConformance starts Debian's memcached 1.6.18 with every spec of the
// conformance corpus, as the operator's pod would run it, and asks the API
// server, with the real CRD, about the same spec in a server-side dry-run
// create. memcached serves with a spec when it stays up, answers version,
// a set and get and stats, reads every option as written (`stats
// settings`) and, under the spec's memory limit in a memory cgroup, stays
// up with a full cache. The API server and ValidateSpec must accept a spec
// if and only if memcached serves with it, except:
//   - a spec that a bound of the operator's own refuses (the case's
//     policy: an item's form, --threads above 64, --conn-limit below 16
//     per thread, an option outside the allow-list, the memory margin)
//     must be refused by both, whatever memcached does with it;
//   - a spec whose fate depends on the node (a --conn-limit above this
//     machine's open-files hard limit but within fs.nr_open, a hash table
//     larger than its memory without overcommit) must be accepted by both:
//     the API server cannot know the node.
func TestConformance(t *testing.T) {
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatalf("memcached is not installed (test/scripts/install-deps.sh installs Debian's 1.6.18): %v", err)
	}
	if out, err := exec.Command("memcached", "-V").Output(); err != nil || strings.TrimSpace(string(out)) != "memcached 1.6.18" {
		t.Fatalf("memcached -V: %q, %v; the corpus's bounds are those of Debian's memcached 1.6.18", out, err)
	}
	b, err := os.ReadFile(filepath.Join(paths.Root, "pkg", "memcached", "testdata", "conformance-corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []conformanceCase
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 200
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	memcacheds := client.Resource(schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}).Namespace("default")
	nofile, nrOpen, memory := nodeLimits(t)

	start := time.Now()
	verdicts := make([]conformanceVerdict, len(corpus))
	var wg sync.WaitGroup
	// Two cores: a few memcached processes at once, and the API server's
	// dry-runs beside them.
	processes, requests := make(chan struct{}, 4), make(chan struct{}, 8)
	ctx := context.Background()
	for i, c := range corpus {
		verdicts[i].c = c
		verdicts[i].nodeLimit = nodeLimit(c.Command, nofile, nrOpen, memory)
		wg.Add(2)
		go func(v *conformanceVerdict) {
			defer wg.Done()
			processes <- struct{}{}
			defer func() { <-processes }()
			deadline := 30 * time.Second
			if v.c.MemoryLimit > 0 {
				deadline = 2 * time.Minute
			}
			r := framework.RunMemcached(ctx, framework.MemcachedRun{Args: v.c.Command[1:], MemoryLimit: v.c.MemoryLimit, Deadline: deadline})
			v.served, v.why, v.peak = r.Served, r.Why, r.Peak
			if r.Served {
				if why := misread(v.c.Settings, r.Settings); why != "" {
					v.served, v.why = false, why
				}
			}
		}(&verdicts[i])
		go func(v *conformanceVerdict, i int) {
			defer wg.Done()
			requests <- struct{}{}
			defer func() { <-requests }()
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cache.example.com/v1alpha1",
				"kind":       "Memcached",
				"metadata":   map[string]any{"name": fmt.Sprintf("conformance-%d", i)},
				"spec":       v.c.Spec,
			}}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err := memcacheds.Create(rctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			v.accepted = err == nil
			if err != nil {
				v.refusal = err.Error()
			}
		}(&verdicts[i], i)
	}
	wg.Wait()
	t.Logf("%d cases in %s", len(corpus), time.Since(start).Round(100*time.Millisecond))

	var mismatches, policyServed, nodeDependent []conformanceVerdict
	for _, v := range verdicts {
		goAccepts := v.c.Invalid == ""
		switch {
		case v.nodeLimit != "":
			nodeDependent = append(nodeDependent, v)
			if !v.accepted || !goAccepts {
				mismatches = append(mismatches, v)
			}
		case v.c.Policy != "":
			if v.served {
				policyServed = append(policyServed, v)
			}
			if v.accepted || goAccepts {
				mismatches = append(mismatches, v)
			}
		case v.accepted != v.served || goAccepts != v.served:
			mismatches = append(mismatches, v)
		}
	}
	if len(policyServed) > 0 {
		t.Logf("refused by a bound of the operator's own, though memcached serves with them:\n%s", verdictTable(policyServed))
	}
	if len(nodeDependent) > 0 {
		t.Logf("accepted since their fate depends on the node; on this one:\n%s", verdictTable(nodeDependent))
	}
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases where the API server or ValidateSpec disagree with memcached (or a policy):\n%s", len(mismatches), len(corpus), verdictTable(mismatches))
	}
}

// misread returns which of want memcached's settings got do not read as
// written, or "".
func misread(want, got map[string]string) string {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s reads %q, not %q", k, got[k], want[k]))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return "served, but " + strings.Join(diffs, ", ")
}

// nodeLimits returns this machine's open-files hard limit, which memcached
// inherits and raises --conn-limit's soft limit to, fs.nr_open, the most
// any process may raise it to, and its memory with swap when the kernel
// refuses allocations beyond it (heuristic overcommit), else 0.
func nodeLimits(t *testing.T) (nofile, nrOpen uint64, memory int64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	if nrOpen, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
		t.Fatal(err)
	}
	overcommit, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(overcommit)) == "1" {
		return rl.Max, nrOpen, 0
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && (fields[0] == "MemTotal:" || fields[0] == "SwapTotal:") {
			kb, _ := strconv.ParseInt(fields[1], 10, 64) // /proc/meminfo's numbers are kB
			memory += kb << 10
		}
	}
	return rl.Max, nrOpen, memory
}

// maxHashpower is memcached 1.6.18's largest hashpower: it exits above it
// on every node.
const maxHashpower = 32

// nodeLimit says why the command's fate depends on the node, or "": a
// --conn-limit above the open-files hard limit but not above nrOpen, the
// most any process may raise it to, or a hash table (8 bytes per bucket,
// 2^hashpower buckets) larger than memory.
func nodeLimit(command []string, nofile, nrOpen uint64, memory int64) string {
	for _, a := range command {
		if v, ok := strings.CutPrefix(a, "--conn-limit="); ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > nofile && n <= nrOpen {
				return fmt.Sprintf("--conn-limit above this machine's open-files hard limit %d", nofile)
			}
		}
		if v, ok := strings.CutPrefix(a, "--extended="); ok && memory > 0 {
			for _, o := range strings.Split(v, ",") {
				if hp, ok := strings.CutPrefix(o, "hashpower="); ok {
					if n, err := strconv.Atoi(hp); err == nil && n >= 0 && n <= maxHashpower && int64(8)<<n > memory {
						return fmt.Sprintf("a hash table of %d GiB, above this machine's %d GiB without overcommit", int64(8)<<n>>30, memory>>30)
					}
				}
			}
		}
	}
	return ""
}

// verdictTable prints verdicts, one a line.
func verdictTable(vs []conformanceVerdict) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CASE\tMEMCACHED\tAPI SERVER\tVALIDATESPEC\tPOLICY OR NODE")
	for _, v := range vs {
		mc := "serves"
		if !v.served {
			mc = "no: " + v.why
		}
		if v.peak > 0 {
			mc += fmt.Sprintf(" (peak %d MiB)", v.peak>>20)
		}
		api := "accepts"
		if !v.accepted {
			api = "refuses: " + v.refusal
		}
		goCheck := "accepts"
		if v.c.Invalid != "" {
			goCheck = "refuses: " + v.c.Invalid
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", v.c.Name, cut(mc, 140), cut(api, 140), cut(goCheck, 100), v.c.Policy+v.nodeLimit)
	}
	w.Flush()
	return b.String()
}

// cut shortens s to n bytes.
func cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
