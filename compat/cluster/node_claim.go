package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// nodeClaimPath records which run owns the node's host-wide state (the bridge, the kubelet's
// port, the iptables chains, the sysctls), and what the host held before it. A run killed
// before its teardown (SIGKILL, a machine's hard stop, an OOM kill) leaves that state behind
// with nobody to undo it; the claim lets the next run tell such leftovers from a node that is
// still running, and undo them instead of refusing to start. /run is emptied at boot, as the
// bridge is.
const nodeClaimPath = "/run/meshlife-node.json"

type nodeClaim struct {
	PID int `json:"pid"`
	// ProcessStart is /proc/PID/stat's start time, so that a pid reused by another process is
	// not taken for the owner.
	ProcessStart    string            `json:"processStart"`
	Run             string            `json:"run"`
	SavedSettings   map[string]string `json:"savedSettings"`
	HostFilesBefore []string          `json:"hostFilesBefore"`
	HostRootsMade   []string          `json:"hostRootsMade"`
}

// writeClaim records this run as the node's owner; it is written before the host is changed.
func (n *node) writeClaim() error {
	start, ok := processStart(os.Getpid())
	if !ok {
		return errors.New("reading this process's start time from /proc/self/stat")
	}
	claim := nodeClaim{PID: os.Getpid(), ProcessStart: start, Run: n.run, SavedSettings: n.savedSettings, HostRootsMade: n.hostRootsMade}
	for path := range n.hostFilesBefore {
		claim.HostFilesBefore = append(claim.HostFilesBefore, path)
	}
	sort.Strings(claim.HostFilesBefore)
	data, err := json.MarshalIndent(claim, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(nodeClaimPath, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the node's claim %s: %w", nodeClaimPath, err)
	}
	return nil
}

// releaseClaim removes the claim once the teardown has run: a teardown is registered only
// once its claim is written.
func releaseClaim() error {
	if err := os.Remove(nodeClaimPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the node's claim %s: %w", nodeClaimPath, err)
	}
	return nil
}

// recoverAbandonedNode tears down what a killed run's node left on this machine, from its claim.
// It refuses when the claim's owner still runs: two nodes cannot share the bridge or the ports.
func recoverAbandonedNode(h *harness) error {
	claim, err := abandonedClaim(nodeClaimPath)
	if err != nil || claim == nil {
		return err
	}
	fmt.Printf("  a node left by a run killed before its teardown (pid %d, files in %s): tearing it down first, its logs kept\n", claim.PID, claim.Run)
	abandoned := &node{h: h, run: claim.Run, savedSettings: claim.SavedSettings, hostFilesBefore: map[string]bool{}, hostRootsMade: claim.HostRootsMade}
	for _, path := range claim.HostFilesBefore {
		abandoned.hostFilesBefore[path] = true
	}
	abandoned.teardown()
	// The runtime's images and layers are most of the folder's size; the logs stay, as the only
	// record of what the killed run saw.
	if err := os.RemoveAll(filepath.Join(claim.Run, "containerd")); err != nil {
		fmt.Fprintf(os.Stderr, "cluster-compat: removing the abandoned node's images: %v\n", err)
	}
	return nil
}

// abandonedClaim reads the claim at path: nil when there is none, the claim when its owner has
// gone, an error when the owner still runs or the file is not a claim.
func abandonedClaim(path string) (*nodeClaim, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the node's claim %s: %w", path, err)
	}
	var claim nodeClaim
	if err := json.Unmarshal(data, &claim); err != nil || claim.PID <= 0 || claim.Run == "" {
		return nil, fmt.Errorf("the node's claim %s is not one this harness wrote (%v): remove it once no node runs on this machine", path, err)
	}
	if start, alive := processStart(claim.PID); alive && start == claim.ProcessStart {
		return nil, fmt.Errorf("another node runs on this machine: cluster-compat pid %d, its files in %s (claim %s)", claim.PID, claim.Run, path)
	}
	return &claim, nil
}

// processStart reads a process's start time (field 22 of /proc/PID/stat, in clock ticks since
// boot); false when the process does not exist.
func processStart(pid int) (string, bool) {
	fields, ok := procStat(pid)
	if !ok || len(fields) < 22-2 {
		return "", false
	}
	return fields[22-3], true
}
