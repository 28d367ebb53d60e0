// Command gopkg-gen writes Gopkg.toml and Gopkg.lock, for dep users, from the go.mod
// build list of the module in --root. tmp/codegen/update-gopkg.sh runs it; package
// github.com/example-inc/memcached-operator/test/dep has the rules.
//
// Regenerate the files:
//
//	gopkg-gen --root /path/to/memcached-operator
//
// Fail, with a diff, when the committed files are stale:
//
//	gopkg-gen --root /path/to/memcached-operator --verify
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/example-inc/memcached-operator/test/dep"
)

func main() {
	root := flag.String("root", ".", "root of the module whose go.mod is rendered; the files are written there")
	verify := flag.Bool("verify", false, "compare the committed files with the rendered ones instead of writing them")
	flag.Parse()

	if err := run(*root, *verify); err != nil {
		fmt.Fprintf(os.Stderr, "gopkg-gen: %v\n", err)
		os.Exit(1)
	}
}

func run(root string, verify bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("failed to resolve --root: %v", err)
	}
	files, err := dep.Generate(context.Background(), root)
	if err != nil {
		return err
	}
	if verify {
		return files.Compare(root)
	}
	return files.Write(root)
}
