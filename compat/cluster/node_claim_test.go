package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A claim is an obstacle while its owner runs, and leftovers to undo once the owner has gone,
// even when the owner's pid has been given to another process since.
func TestNodeClaimOwnerAliveOrGone(t *testing.T) {
	dir := t.TempDir()
	write := func(claim nodeClaim) string {
		path := filepath.Join(dir, "claim.json")
		data, err := json.Marshal(claim)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	if claim, err := abandonedClaim(filepath.Join(dir, "none.json")); claim != nil || err != nil {
		t.Fatalf("no claim file: got %v, %v; want nothing", claim, err)
	}

	start, ok := processStart(os.Getpid())
	if !ok || start == "" {
		t.Fatalf("processStart(self) = %q, %v", start, ok)
	}
	running := write(nodeClaim{PID: os.Getpid(), ProcessStart: start, Run: "/tmp/run/node"})
	if _, err := abandonedClaim(running); err == nil || !strings.Contains(err.Error(), "another node runs") {
		t.Fatalf("a claim whose owner runs: got %v, want a refusal", err)
	}

	reused := write(nodeClaim{PID: os.Getpid(), ProcessStart: start + "0", Run: "/tmp/run/node"})
	if claim, err := abandonedClaim(reused); err != nil || claim == nil {
		t.Fatalf("a claim whose pid now belongs to another process: got %v, %v; want the claim", claim, err)
	}

	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	if _, alive := processStart(child.Process.Pid); alive {
		t.Fatalf("processStart of an exited, reaped child %d says it runs", child.Process.Pid)
	}
	gone := write(nodeClaim{PID: child.Process.Pid, ProcessStart: start, Run: "/tmp/run/node", HostRootsMade: []string{"/run/containerd"}})
	claim, err := abandonedClaim(gone)
	if err != nil || claim == nil || claim.Run != "/tmp/run/node" || len(claim.HostRootsMade) != 1 {
		t.Fatalf("a claim whose owner has gone: got %+v, %v; want it read back", claim, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "claim.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := abandonedClaim(filepath.Join(dir, "claim.json")); err == nil || !strings.Contains(err.Error(), "not one this harness wrote") {
		t.Fatalf("a file that is not a claim: got %v, want an error naming it", err)
	}
}
