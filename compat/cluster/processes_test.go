package main

import (
	"os"
	"testing"
)

// The three readers of /proc/PID/stat share procStat's numbering: each reads its own field.
func TestProcStatFields(t *testing.T) {
	if got, want := parentPID(os.Getpid()), os.Getppid(); got != want {
		t.Fatalf("parentPID(self) = %d, want %d", got, want)
	}
	if cpu := processCPU(os.Getpid()); cpu < 0 {
		t.Fatalf("processCPU(self) = %v, want a time", cpu)
	}
	start, ok := processStart(os.Getpid())
	if again, _ := processStart(os.Getpid()); !ok || start == "" || again != start {
		t.Fatalf("processStart(self) = %q, %v, then %q: want one time", start, ok, again)
	}
	if _, ok := procStat(-1); ok {
		t.Fatal("procStat(-1) reads a process")
	}
}

// The kernel hands a closed port out again; freePort does not, within a run.
func TestFreePortNeverTwice(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 1000; i++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("freePort gave %d twice, the %dth time", port, i+1)
		}
		seen[port] = true
	}
}
