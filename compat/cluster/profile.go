package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileSeconds is how long each engine's CPU profile runs (-profile).
const profileSeconds = 10

// profile takes a CPU profile of an engine's process from its pprof endpoint (pprofURL, the
// host and port of Gatekeeper's --enable-pprof or Kyverno's --profile) while one client
// creates new objects through the API server, and prints where the engine's time went: the
// functions that took the most CPU, themselves and with what they called. Nothing happens
// without -profile.
func (h *harness) profile(ctx context.Context, label, pprofURL string) error {
	if h.profileDir == "" || h.benchObject == nil {
		return nil
	}
	if err := os.MkdirAll(h.profileDir, 0o755); err != nil {
		return err
	}
	client, err := h.unthrottledClient()
	if err != nil {
		return err
	}
	file := filepath.Join(h.profileDir, label+".pprof")
	fetched := make(chan error, 1)
	go func() {
		fetched <- fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", pprofURL, profileSeconds), file)
	}()
	admissions := 0
	for {
		select {
		case err := <-fetched:
			if err != nil {
				return fmt.Errorf("the CPU profile of %s: %w", label, err)
			}
			return h.printProfile(label, file, admissions)
		default:
		}
		_, _ = client.create(ctx, h.benchObjectAt(newObjects, admissions), true)
		admissions++
	}
}

func fetchProfile(ctx context.Context, url, file string) error {
	ctx, cancel := context.WithTimeout(ctx, (profileSeconds+30)*time.Second)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(response.Body, 500))
		return fmt.Errorf("%s: %s: %s", url, response.Status, body)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, response.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// printProfile prints the profile's top functions, by their own time and with their callees',
// with `go tool pprof` (the profile carries its symbols), and keeps the text beside it.
func (h *harness) printProfile(label, file string, admissions int) error {
	var text strings.Builder
	fmt.Fprintf(&text, "CPU profile of %s over %d s, %d admissions of new objects at concurrency 1 (%s)\n", label, profileSeconds, admissions, file)
	for _, order := range []string{"-flat", "-cum"} {
		output, err := exec.Command("go", "tool", "pprof", "-top", order, "-nodecount=25", file).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %v\n%s", file, err, output)
		}
		text.Write(output)
	}
	fmt.Println(indentLines(text.String()))
	return os.WriteFile(strings.TrimSuffix(file, ".pprof")+".txt", []byte(text.String()), 0o644)
}
