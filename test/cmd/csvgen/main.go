// Command csvgen renders the memcached-operator's OLM catalog (deploy/olm-catalog) from the
// manifests in deploy/. test/scripts/olm-catalog.sh runs it; see package catalog for the rules.
//
// Render one release (and point the package's channel at the newest release):
//
//	csvgen --deploy-dir deploy --catalog-dir deploy/olm-catalog/memcached-operator --version 0.0.2 --replaces 0.0.1
//
// Check that every committed release is what deploy/ renders today:
//
//	csvgen --deploy-dir deploy --catalog-dir deploy/olm-catalog/memcached-operator --verify
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/example-inc/memcached-operator/test/olm/catalog"
)

func main() {
	deployDir := flag.String("deploy-dir", "deploy", "directory holding crd.yaml, sa.yaml, rbac.yaml, operator.yaml and cr.yaml")
	catalogDir := flag.String("catalog-dir", "deploy/olm-catalog/"+catalog.PackageName, "the package's catalog directory")
	version := flag.String("version", "", "release to render, such as 0.0.2")
	replaces := flag.String("replaces", "", "release that this one upgrades from, such as 0.0.1 (empty for the first release)")
	verify := flag.Bool("verify", false, "render every committed release into a temporary directory and fail if the catalog differs")
	flag.Parse()

	if err := run(*deployDir, *catalogDir, *version, *replaces, *verify); err != nil {
		fmt.Fprintf(os.Stderr, "csvgen: %v\n", err)
		os.Exit(1)
	}
}

func run(deployDir, catalogDir, version, replaces string, verify bool) error {
	d, err := catalog.LoadDeploy(deployDir)
	if err != nil {
		return err
	}
	if verify {
		tmp, err := os.MkdirTemp("", "olm-catalog-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := catalog.Regenerate(d, catalogDir, tmp); err != nil {
			return err
		}
		diffs, err := catalog.Diff(catalogDir, tmp)
		if err != nil {
			return err
		}
		for _, line := range diffs {
			fmt.Fprintln(os.Stderr, line)
		}
		if len(diffs) > 0 {
			return fmt.Errorf("%s is stale: run `make olm-catalog VERSION=<v> REPLACES=<previous>` for each release", catalogDir)
		}
		fmt.Printf("%s is up to date with %s\n", catalogDir, deployDir)
		return nil
	}
	if version == "" {
		return fmt.Errorf("--version is required")
	}
	if err := catalog.WriteBundle(d, catalogDir, version, replaces); err != nil {
		return err
	}
	fmt.Printf("rendered %s/%s/%s\n", catalogDir, version, catalog.CSVFileName(version))
	return nil
}
