package scripts

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUndeployKeepsTheCRD: `make undeploy` deletes the operator, its RBAC
// and ServiceAccount and never the CRD, whose deletion would delete every
// Memcached in the cluster with its pods; only `make undeploy-crd` deletes
// the CRD. It reads the recipes as make would run them (make -n).
func TestUndeployKeepsTheCRD(t *testing.T) {
	recipe := func(target string) string {
		t.Helper()
		out, err := exec.Command("make", "--no-print-directory", "-C", "../..", "-n", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v: %s", target, err, out)
		}
		return string(out)
	}
	undeploy := recipe("undeploy")
	for _, want := range []string{"deploy/operator.yaml", "deploy/rbac.yaml", "deploy/sa.yaml"} {
		if !strings.Contains(undeploy, want) {
			t.Errorf("make undeploy does not delete %s:\n%s", want, undeploy)
		}
	}
	if strings.Contains(undeploy, "crd.yaml") || strings.Contains(undeploy, "memcached --all") {
		t.Errorf("make undeploy deletes the CRD or the Memcacheds:\n%s", undeploy)
	}
	if crd := recipe("undeploy-crd"); !strings.Contains(crd, "delete -f deploy/crd.yaml") {
		t.Errorf("make undeploy-crd does not delete deploy/crd.yaml:\n%s", crd)
	}
}
