package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Describe returns `kubectl describe` of kinds in a namespace, then its events in
// time order, for failure reports. kinds is a comma-separated list such as
// "memcached,deployments,pods". Errors are included in the text, not returned.
func Describe(ctx context.Context, k Kubectl, namespace, kinds string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	k = k.WithNamespace(namespace)
	var b strings.Builder
	fmt.Fprintf(&b, "===== kubectl -n %s get %s -o wide\n", namespace, kinds)
	b.WriteString(output(k.Run(ctx, "get", kinds, "-o", "wide")))
	fmt.Fprintf(&b, "===== kubectl -n %s describe %s\n", namespace, kinds)
	b.WriteString(output(k.Run(ctx, "describe", kinds)))
	fmt.Fprintf(&b, "===== kubectl -n %s get events --sort-by=.lastTimestamp\n", namespace)
	b.WriteString(output(k.Run(ctx, "get", "events", "--sort-by=.lastTimestamp")))
	return b.String()
}

func output(out string, err error) string {
	if err != nil {
		return out + "(error: " + err.Error() + ")\n"
	}
	return out
}

// DumpOnFailure registers a cleanup that, if t failed, logs each report. Register it
// after the cleanups that delete what the reports describe: cleanups run last-in,
// first-out, so it then runs before them.
func DumpOnFailure(t testing.TB, reports ...func() string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range reports {
			t.Log("\n" + r())
		}
	})
}
