package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServiceCIDR is the Service range of the local clusters: test/scripts/cluster.sh's
// SERVICE_CIDR (TestServiceCIDRMatchesClusterScript checks that they agree).
const ServiceCIDR = "198.19.0.0/24"

// kubeRouterChainPrefixes name the iptables chains that kube-router's network policy
// firewall creates: its three top-level chains (KUBE-ROUTER-INPUT, -FORWARD and
// -OUTPUT), a chain per policy and its default (KUBE-NWPLCY-), and a chain per pod
// (KUBE-POD-FW-).
var kubeRouterChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-"}

// kubeProxyServiceChains are the chains of kube-proxy's iptables mode whose rules
// follow the cluster's Services and endpoints; the suite's other tests create and
// delete Services while kube-router runs, so these may differ between the states
// that KubeRouter.Stop compares. The prefixes are the chains of one Service or
// endpoint each.
var (
	kubeProxyServiceChains        = map[string]bool{"KUBE-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-EXTERNAL-SERVICES": true, "KUBE-PROXY-FIREWALL": true}
	kubeProxyServiceChainPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"}
)

// iptablesFamilies are the save and restore commands of IPv4 and IPv6.
var iptablesFamilies = []struct{ save, restore string }{
	{"iptables-save", "iptables-restore"},
	{"ip6tables-save", "ip6tables-restore"},
}

// KubeRouter is kube-router's network policy firewall (test/tools/kube-router)
// running as a host process for the real node, so that NetworkPolicies are enforced
// on the node's pods. It is for the tests only: kube-router v2.1.0 has known
// security advisories, and nothing that ships runs or imports it.
//
// kube-router leaves its iptables chains, the jumps to them and its ipsets behind
// when it exits, and its own --cleanup-config panics on this machine (it expects
// IPVS and modprobe), so Stop removes them itself and then checks that the host's
// firewall is as StartKubeRouter found it.
type KubeRouter struct {
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	// before is the firewall before kube-router started.
	before FirewallState
	// exited is closed when the process has exited; waitErr is then its status.
	exited  chan struct{}
	waitErr error
	stop    sync.Once
	stopErr error
	// removed says what Stop removed.
	removed string
}

// StartKubeRouter removes whatever firewall state an earlier kube-router left (a
// test binary killed before its teardown), records the host's firewall, then starts
// kube-router against c's admin kubeconfig as node nodeName, logging to logPath,
// and waits until it has hooked its chains into INPUT, FORWARD and OUTPUT. On
// failure it has stopped kube-router and restored the host already.
func StartKubeRouter(ctx context.Context, paths Paths, c *Cluster, nodeName, logPath string) (*KubeRouter, error) {
	if err := paths.RequireTools("kube-router"); err != nil {
		return nil, err
	}
	for _, cmd := range []string{"ipset", "iptables", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return nil, fmt.Errorf("%s is required for kube-router (test/scripts/install-deps.sh test installs it): %v", cmd, err)
		}
	}
	if removed, err := removeKubeRouterState(ctx, nil); err != nil {
		return nil, fmt.Errorf("remove an earlier kube-router's firewall state: %v", err)
	} else if removed != "nothing" {
		fmt.Fprintf(os.Stderr, "framework: removed an earlier kube-router's firewall state: %s\n", removed)
	}
	before, err := ReadFirewallState(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(paths.Tool("kube-router"),
		"--kubeconfig="+c.Kubeconfig,
		"--hostname-override="+nodeName,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--enable-cni=false",
		"--enable-pod-egress=false",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--v=1")
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group keeps a terminal's Ctrl-C for the test binary, whose
	// teardown stops it; the parent-death signal stops it if the test binary dies
	// without one (a -timeout panic), so that no firewall outlives the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start kube-router: %v", err)
	}
	k := &KubeRouter{cmd: cmd, logPath: logPath, log: log, before: before, exited: make(chan struct{})}
	go func() {
		k.waitErr = cmd.Wait()
		close(k.exited)
	}()
	err = Eventually(ctx, time.Minute, "kube-router to hook its chains into INPUT, FORWARD and OUTPUT", func(ctx context.Context) error {
		select {
		case <-k.exited:
			return Permanent(fmt.Errorf("kube-router exited: %v", k.waitErr))
		default:
		}
		return hooked(ctx)
	})
	if err != nil {
		err = fmt.Errorf("%v\n%s", err, k.Diagnostics(ctx))
		if stopErr := k.Stop(ctx); stopErr != nil {
			err = fmt.Errorf("%v\nand then: %v", err, stopErr)
		}
		return nil, err
	}
	return k, nil
}

// hooked succeeds when the filter table's INPUT, FORWARD and OUTPUT jump to
// kube-router's chain of the same name.
func hooked(ctx context.Context) error {
	for _, chain := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "filter", "-S", chain).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables -S %s: %v: %s", chain, err, out)
		}
		if !strings.Contains(string(out), " -j KUBE-ROUTER-"+chain) {
			return fmt.Errorf("%s has no jump to KUBE-ROUTER-%s yet", chain, chain)
		}
	}
	return nil
}

// LogPath is kube-router's log file.
func (k *KubeRouter) LogPath() string { return k.logPath }

// Diagnostics returns the tail of kube-router's log, the host's iptables rules and
// its ipsets, for failure reports. Errors are included in the text.
func (k *KubeRouter) Diagnostics(ctx context.Context) string {
	var b strings.Builder
	fmt.Fprintf(&b, "===== kube-router log (tail of %s)\n", k.logPath)
	if data, err := os.ReadFile(k.logPath); err != nil {
		fmt.Fprintf(&b, "(error: %v)\n", err)
	} else {
		b.WriteString(lastLines(string(data), 60))
		b.WriteString("\n")
	}
	for _, args := range [][]string{{"iptables-save"}, {"ipset", "list", "-n"}} {
		fmt.Fprintf(&b, "===== %s\n", strings.Join(args, " "))
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		b.Write(out)
		if err != nil {
			fmt.Fprintf(&b, "(error: %v)\n", err)
		}
	}
	return b.String()
}

// Stop kills kube-router, removes the chains, jumps and ipsets it made, and fails
// unless the host's firewall is then as StartKubeRouter found it, apart from the
// chains of kube-proxy that follow the cluster's Services. It does its work once;
// later calls return the first call's error.
func (k *KubeRouter) Stop(ctx context.Context) error {
	k.stop.Do(func() { k.stopErr = k.stopOnce(ctx) })
	return k.stopErr
}

func (k *KubeRouter) stopOnce(ctx context.Context) error {
	defer k.log.Close()
	var errs []error
	select {
	case <-k.exited:
	default:
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited:
		case <-time.After(10 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.exited
		}
	}
	removed, err := removeKubeRouterState(ctx, k.before.IPSets)
	k.removed = removed
	if err != nil {
		errs = append(errs, err)
	}
	after, err := ReadFirewallState(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if diff := k.before.Diff(after); diff != "" {
		errs = append(errs, fmt.Errorf("kube-router left the host's firewall changed (- before it started, + after it stopped):\n%s", diff))
	}
	return errors.Join(errs...)
}

// Removed says what Stop removed of kube-router's: how many jumps, chains and
// ipsets.
func (k *KubeRouter) Removed() string { return k.removed }

// FirewallState is what a host's firewall holds that kube-router may change.
type FirewallState struct {
	// Rules are the lines of iptables-save and ip6tables-save, each after a
	// "### iptables-save" or "### ip6tables-save" line, without comments and
	// counters, so that two states compare equal when their rules are.
	Rules []string
	// IPSets are the names of the ipsets, sorted.
	IPSets []string
}

// ReadFirewallState reads the host's iptables rules and ipset names.
func ReadFirewallState(ctx context.Context) (FirewallState, error) {
	var s FirewallState
	for _, f := range iptablesFamilies {
		out, err := saveRules(ctx, f.save)
		if err != nil {
			return s, err
		}
		s.Rules = append(s.Rules, "### "+f.save)
		s.Rules = append(s.Rules, normalizeSave(out)...)
	}
	names, err := ipsetNames(ctx)
	if err != nil {
		return s, err
	}
	s.IPSets = names
	return s, nil
}

// saveRules runs an iptables save command; a family whose command is missing
// has no rules.
func saveRules(ctx context.Context, save string) (string, error) {
	if _, err := exec.LookPath(save); err != nil {
		return "", nil
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, save)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", save, err, stderr.String())
	}
	return string(out), nil
}

// ipsetNames lists the host's ipsets, sorted.
func ipsetNames(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ipset", "list", "-n").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ipset list -n: %v: %s", err, out)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	return names, nil
}

// counters is the packet and byte counter of a chain's policy in save output.
var counters = regexp.MustCompile(` \[[0-9]+:[0-9]+\]$`)

// normalizeSave returns the lines of iptables-save output without its comments
// and counters.
func normalizeSave(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, counters.ReplaceAllString(l, ""))
	}
	return lines
}

// Diff returns the rules and ipsets that differ between s and after, a line each,
// "- " for those only in s and "+ " for those only in after; nothing when they are
// the same. The rules of kube-proxy's Service chains are left out.
func (s FirewallState) Diff(after FirewallState) string {
	var b strings.Builder
	before, now := withoutServiceChains(s.Rules), withoutServiceChains(after.Rules)
	gone, added := multisetDiff(before, now)
	for _, l := range gone {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	for _, l := range added {
		fmt.Fprintf(&b, "+ %s\n", l)
	}
	if len(gone) == 0 && len(added) == 0 && strings.Join(before, "\n") != strings.Join(now, "\n") {
		b.WriteString("the same rules, in another order\n")
	}
	gone, added = multisetDiff(s.IPSets, after.IPSets)
	for _, n := range gone {
		fmt.Fprintf(&b, "- ipset %s\n", n)
	}
	for _, n := range added {
		fmt.Fprintf(&b, "+ ipset %s\n", n)
	}
	return b.String()
}

// withoutServiceChains drops the declarations and rules of kube-proxy's Service
// chains from normalized save lines.
func withoutServiceChains(lines []string) []string {
	var kept []string
	for _, l := range lines {
		if isServiceChain(chainOf(l)) {
			continue
		}
		kept = append(kept, l)
	}
	return kept
}

func isServiceChain(chain string) bool {
	return kubeProxyServiceChains[chain] || hasAnyPrefix(chain, kubeProxyServiceChainPrefixes)
}

func isKubeRouterChain(chain string) bool {
	return hasAnyPrefix(chain, kubeRouterChainPrefixes)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// chainOf returns the chain that a save line declares (":CHAIN POLICY") or appends
// to ("-A CHAIN ..."); "" for other lines.
func chainOf(line string) string {
	switch {
	case strings.HasPrefix(line, ":"):
		name, _, _ := strings.Cut(line[1:], " ")
		return name
	case strings.HasPrefix(line, "-A "):
		name, _, _ := strings.Cut(line[3:], " ")
		return name
	}
	return ""
}

// jumpTarget returns the chain that a rule jumps or goes to ("-j X", "-g X").
func jumpTarget(rule string) string {
	fields := saveFields(rule)
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "-j" || fields[i] == "-g" {
			return fields[i+1]
		}
	}
	return ""
}

// saveFields splits a rule of save output into its arguments, a double-quoted
// argument (a comment), with its backslash escapes, being one.
func saveFields(rule string) []string {
	var fields []string
	var cur strings.Builder
	inField, quoted := false, false
	for i := 0; i < len(rule); i++ {
		c := rule[i]
		switch {
		case quoted && c == '\\' && i+1 < len(rule):
			i++
			cur.WriteByte(rule[i])
		case c == '"':
			quoted, inField = !quoted, true
		case c == ' ' && !quoted:
			if inField {
				fields = append(fields, cur.String())
				cur.Reset()
				inField = false
			}
		default:
			cur.WriteByte(c)
			inField = true
		}
	}
	if inField {
		fields = append(fields, cur.String())
	}
	return fields
}

// multisetDiff returns the lines of a that b lacks and the lines of b that a lacks,
// counting repeats, in their order.
func multisetDiff(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, l := range b {
		count[l]++
	}
	for _, l := range a {
		if count[l] > 0 {
			count[l]--
			continue
		}
		onlyA = append(onlyA, l)
	}
	count = map[string]int{}
	for _, l := range a {
		count[l]++
	}
	for _, l := range b {
		if count[l] > 0 {
			count[l]--
			continue
		}
		onlyB = append(onlyB, l)
	}
	return onlyA, onlyB
}

// cleanupScript returns the iptables-restore --noflush input that removes
// kube-router's chains from the save output of one family: in each table, the rules
// of other chains that jump to them are deleted, then each of its chains is flushed,
// then deleted. It is empty when there is nothing of kube-router's.
func cleanupScript(save string) string {
	var b strings.Builder
	var table string
	var deletes, chains []string
	flush := func() {
		if table == "" || (len(deletes) == 0 && len(chains) == 0) {
			return
		}
		fmt.Fprintf(&b, "*%s\n", table)
		for _, d := range deletes {
			b.WriteString(d + "\n")
		}
		for _, c := range chains {
			fmt.Fprintf(&b, "-F %s\n", c)
		}
		for _, c := range chains {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "*"):
			flush()
			table, deletes, chains = l[1:], nil, nil
		case strings.HasPrefix(l, ":"):
			if c := chainOf(l); isKubeRouterChain(c) {
				chains = append(chains, c)
			}
		case strings.HasPrefix(l, "-A "):
			if !isKubeRouterChain(chainOf(l)) && isKubeRouterChain(jumpTarget(l)) {
				deletes = append(deletes, "-D "+l[3:])
			}
		}
	}
	flush()
	return b.String()
}

// removeKubeRouterState deletes kube-router's chains and the jumps to them in every
// table of both families, then destroys every ipset that keep does not name: all of
// them when keep is nil and the ipsets are kube-router's (KUBE- and TMP- names). It
// says how many jumps, chains and ipsets it removed, or "nothing".
func removeKubeRouterState(ctx context.Context, keep []string) (string, error) {
	var errs []error
	var jumps, chains, sets int
	for _, f := range iptablesFamilies {
		save, err := saveRules(ctx, f.save)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		script := cleanupScript(save)
		if script == "" {
			continue
		}
		cmd := exec.CommandContext(ctx, f.restore, "-w", "5", "--noflush")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s --noflush: %v: %s\ninput:\n%s", f.restore, err, out, script))
			continue
		}
		jumps += strings.Count(script, "\n-D ")
		chains += strings.Count(script, "\n-X ")
	}
	names, err := ipsetNames(ctx)
	if err != nil {
		return "", errors.Join(append(errs, err)...)
	}
	kept := map[string]bool{}
	for _, n := range keep {
		kept[n] = true
	}
	for _, n := range names {
		if kept[n] || (keep == nil && !hasAnyPrefix(n, []string{"KUBE-", "TMP-"})) {
			continue
		}
		// The kernel may hold a set a moment after the last rule that matched it
		// is gone: retry "in use" briefly.
		err := Eventually(ctx, 10*time.Second, "ipset destroy "+n, func(ctx context.Context) error {
			out, err := exec.CommandContext(ctx, "ipset", "destroy", n).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sets++
	}
	removed := "nothing"
	if jumps+chains+sets > 0 {
		removed = fmt.Sprintf("%d jumps, %d chains, %d ipsets", jumps, chains, sets)
	}
	return removed, errors.Join(errs...)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
