package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stallCheck freezes meshlife serve (SIGSTOP, then SIGCONT) while the scenario's Job, which
// must be refused, is created. Its socket still accepts connections (the kernel's backlog) but
// nothing answers: what a starved, swapped-out or hung server looks like to its caller. A stall
// well inside the engine's deadlines must leave the verdict as it is. A stall past them must
// end visibly: either in what the failure policy makes of an object not checked (a refusal,
// or a warning saying so), or, where the API server's deadline for the engine's webhook struck
// first, in its count of admissions failed open, which the MeshlifeAdmissionsFailedOpen alert
// watches. An admission with neither is a verdict lost in silence. The scenario's Namespace is
// injected and its verdict converged already (faultChecks, its caller, sees to it).
func (s *scenario) stallCheck(ctx context.Context, engine string, srv *server, unjudged func(verdict) bool, short, long time.Duration) {
	h := s.h
	for i, stall := range []time.Duration{short, long} {
		before, err := h.failedOpen(ctx)
		if err != nil {
			h.fail("%s: %v", engine, err)
			return
		}
		job := s.job.DeepCopy()
		job.SetName(fmt.Sprintf("%s-stall-%d", s.job.GetName(), i))
		started := time.Now()
		answered := make(chan verdict, 1)
		pid := srv.proc.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGSTOP)
		go func() { answered <- verdictOf(h.k.create(ctx, job, true)) }()
		var v verdict
		select {
		case v = <-answered:
			_ = syscall.Kill(-pid, syscall.SIGCONT)
		case <-time.After(stall):
			_ = syscall.Kill(-pid, syscall.SIGCONT)
			v = <-answered
		}
		took := time.Since(started).Round(time.Millisecond)
		after, err := h.failedOpen(ctx)
		if err != nil {
			h.fail("%s: %v", engine, err)
			return
		}
		opened := openedSince(before, after)
		judged := len(compare(s.want["enabled"], v, false)) == 0
		if stall == short {
			h.check(judged, "%s: meshlife serve stalled %v: the Job is judged, answered in %v (%s %q %v %v)",
				engine, stall, took, v.word(), oneLine(v.message), v.warnings, v.err)
			continue
		}
		outcome := "lost in silence: admitted with no verdict, no warning and no fail-open counted"
		switch {
		case judged:
			outcome = "judged"
		case v.err == nil && !v.refused && len(v.warnings) == 0 && len(opened) > 0:
			outcome = "admitted with no verdict, counted by the API server as failed open for " + strings.Join(opened, ", ")
		case unjudged(v) && (v.refused || len(v.warnings) > 0):
			outcome = fmt.Sprintf("answered as not checked, as the failure policy says: %s %q %v", v.word(), oneLine(v.message), v.warnings)
		}
		h.check(!strings.HasPrefix(outcome, "lost"), "%s: meshlife serve stalled %v, past every deadline: the Job is %s, in %v",
			engine, stall, outcome, took)
	}
}

// failedOpen reads the API server's apiserver_admission_webhook_fail_open_count, by webhook.
func (h *harness) failedOpen(ctx context.Context) (map[string]float64, error) {
	raw, err := h.k.core.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's /metrics: %w", err)
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") {
			continue
		}
		labels := line[strings.Index(line, "{")+1 : strings.Index(line, "}")]
		name := ""
		for _, label := range strings.Split(labels, ",") {
			if value, ok := strings.CutPrefix(label, "name="); ok {
				name = strings.Trim(value, `"`)
			}
		}
		value, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		counts[name] += value
	}
	return counts, nil
}

// openedSince names the webhooks whose fail-open count grew.
func openedSince(before, after map[string]float64) []string {
	var names []string
	for name, count := range after {
		if count > before[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
