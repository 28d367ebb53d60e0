// Command vulngate is the gate of `make vulncheck` (package
// github.com/example-inc/memcached-operator/test/vuln has the rules): it reads
// govulncheck's -format json reports, each as NAME=FILE, and exits 1 when one
// finds a called vulnerability that --reviewed does not explain, or when an entry
// of --reviewed is no longer found called. test/scripts/vulncheck.sh runs it:
//
//	vulngate --reviewed vuln/reviewed.yaml "operator binaries=operator.json" "test module=test.json"
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/example-inc/memcached-operator/test/vuln"
)

func main() {
	reviewed := flag.String("reviewed", "vuln/reviewed.yaml", "the reviewed list")
	flag.Parse()

	ok, err := run(*reviewed, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "vulngate: %v\n", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run checks the reports and prints what it found; ok is false when the gate
// fails.
func run(reviewedPath string, args []string) (ok bool, err error) {
	if len(args) == 0 {
		return false, fmt.Errorf("no report given: want NAME=FILE arguments")
	}
	entries, err := vuln.ReadReviewed(reviewedPath)
	if err != nil {
		return false, err
	}
	var reports []*vuln.Report
	for _, arg := range args {
		name, file, found := strings.Cut(arg, "=")
		if !found || name == "" || file == "" {
			return false, fmt.Errorf("argument %q: want NAME=FILE", arg)
		}
		f, err := os.Open(file)
		if err != nil {
			return false, err
		}
		r, err := vuln.ReadReport(name, f)
		f.Close()
		if err != nil {
			return false, err
		}
		fmt.Printf("%s: %s over %s (%s)\n", r.Name, r.Scanner, r.DB, r.GoVersion)
		reports = append(reports, r)
	}

	res := vuln.Check(entries, reports)
	for _, r := range reports {
		if len(r.Findings) == 0 {
			fmt.Printf("%s: no vulnerability found\n", r.Name)
		}
	}
	for _, v := range res.Reviewed {
		fmt.Printf("%s: %s (%s) is called, reviewed in %s: %s\n", v.Report, v.ID, v.Where(), reviewedPath, v.Summary)
	}
	for _, v := range res.NotCalled {
		fmt.Printf("%s: %s (%s) is %s only, not called: %s\n", v.Report, v.ID, v.Where(), v.Level, v.Summary)
	}
	if len(res.Problems) > 0 {
		for _, p := range res.Problems {
			fmt.Printf("FAIL %s\n", p)
		}
		return false, nil
	}
	fmt.Printf("no called vulnerability but the %d reviewed in %s\n", len(entries), reviewedPath)
	return true, nil
}
