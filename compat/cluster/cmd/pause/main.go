// Command pause is the reality stage's pod sandbox process, the image containerd's CRI names
// as sandbox_image (registry.k8s.io/pause:3.10, imported from a local archive: no registry is
// reachable). It does what Kubernetes' build/pause/linux/pause.c does: holds the pod's
// namespaces by blocking forever, reaps the zombies re-parented to it (SIGCHLD), and exits 0
// on SIGINT or SIGTERM. Built static: CGO_ENABLED=0 go build -trimpath -o bin/pause ./cmd/pause
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const version = "meshlife-pause-3.10"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-v" {
		fmt.Printf("pause.go %s\n", version)
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: %s [-v]\n", os.Args[0])
		os.Exit(1)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// A child may have exited before Notify: reap once up front.
	reap()
	for sig := range signals {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every exited child without blocking; signals coalesce, so one SIGCHLD may
// stand for several children.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
