// Command pause is the sandbox ("infra") container of every pod on the local
// cluster's real node. containerd starts it first in each pod to hold the
// pod's namespaces; it must stay up until the kubelet stops the pod, and, as
// PID 1 of a pod that shares its process namespace, reap orphaned children.
//
// The upstream pause image cannot be pulled on an offline machine, so the
// node's containerd is configured with this one, built by
// test/scripts/images.sh into a FROM scratch image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (memcached-operator local node)")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
