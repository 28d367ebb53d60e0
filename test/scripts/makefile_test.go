package scripts

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUndeployKeepsTheCRD: `make deploy` applies every manifest of deploy/
// but the example Memcached, and `make undeploy` deletes each of them (the
// operator, its PodDisruptionBudget, RBAC and ServiceAccount) but never the
// CRD, whose deletion would delete every Memcached in the cluster with its
// pods, nor the tenant roles; only `make undeploy-crd` deletes those. It reads the recipes as
// make would run them (make -n).
func TestUndeployKeepsTheCRD(t *testing.T) {
	recipe := func(target string) string {
		t.Helper()
		out, err := exec.Command("make", "--no-print-directory", "-C", "../..", "-n", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v: %s", target, err, out)
		}
		return string(out)
	}
	manifests, err := filepath.Glob("../../deploy/*.yaml")
	if err != nil || len(manifests) == 0 {
		t.Fatalf("deploy/*.yaml: %v, %v", manifests, err)
	}
	deploy, undeploy := recipe("deploy"), recipe("undeploy")
	for _, m := range manifests {
		name := filepath.Base(m)
		if name == "cr.yaml" {
			// The guide's example Memcached, which users create.
			continue
		}
		// make deploy applies operator.yaml as rendered for IMG.
		if !strings.Contains(deploy, "deploy/"+name) && !strings.Contains(deploy, "/"+name) {
			t.Errorf("make deploy does not apply deploy/%s:\n%s", name, deploy)
		}
		withCRD := name == "crd.yaml" || name == "tenant-roles.yaml"
		if deletes := strings.Contains(undeploy, "deploy/"+name); deletes == withCRD {
			t.Errorf("make undeploy deletes deploy/%s: %t, want %t:\n%s", name, deletes, !withCRD, undeploy)
		}
	}
	if strings.Contains(undeploy, "memcached --all") {
		t.Errorf("make undeploy deletes the Memcacheds:\n%s", undeploy)
	}
	if crd := recipe("undeploy-crd"); !strings.Contains(crd, "delete -f deploy/crd.yaml -f deploy/tenant-roles.yaml") {
		t.Errorf("make undeploy-crd does not delete deploy/crd.yaml and deploy/tenant-roles.yaml:\n%s", crd)
	}
}
