package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A load run in the style of Kyverno's own scaling tests (k6 virtual users, each creating Pods
// and Deployments through the API server for a set time): loadUsers clients, each creating a
// new Pod then a new Deployment, again and again, for loadDuration. Real creates, stored in
// etcd, so that each one passes every admission webhook as a user's would; the objects are
// deleted after each configuration.

// loadFigure is one configuration under load.
type loadFigure struct {
	config              string
	users               int
	duration            time.Duration
	admissions          int
	errors              int
	firstError          string
	p50, p95, p99, max  time.Duration
	serveCPU, engineCPU float64 // seconds of CPU over the run; -1: no such process
	apiServerCPU        float64
	machineBusy         float64 // seconds of CPU the whole machine spent over the run
	answers             map[string]int
}

// loadObjects are the two objects each user creates in turn: `meshlife bench`'s small Pod and
// typical Deployment, in the injected namespace.
func (h *harness) loadObjects() ([]*unstructured.Unstructured, error) {
	pod, err := readBenchInput(filepath.Join(h.dir, "bench-inputs", "pod-small.json"))
	if err != nil {
		return nil, err
	}
	pod.SetNamespace(benchNamespace)
	return []*unstructured.Unstructured{pod, h.benchObject}, nil
}

// ensureServiceAccounts creates the ServiceAccounts the objects run as: the API server's
// ServiceAccount admission refuses a Pod whose account does not exist.
func (h *harness) ensureServiceAccounts(ctx context.Context, objects []*unstructured.Unstructured) error {
	for _, obj := range objects {
		for _, path := range [][]string{{"spec", "serviceAccountName"}, {"spec", "template", "spec", "serviceAccountName"}} {
			name, _, _ := unstructured.NestedString(obj.Object, path...)
			if name == "" {
				continue
			}
			account := objectFor("v1", "ServiceAccount", benchNamespace, name)
			if _, err := h.k.apply(ctx, account); err != nil {
				return fmt.Errorf("the ServiceAccount %s/%s: %w", benchNamespace, name, err)
			}
		}
	}
	return nil
}

func readBenchInput(file string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var input struct {
		Review struct {
			Object map[string]interface{} `json:"object"`
		} `json:"review"`
	}
	if err := json.Unmarshal(data, &input); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &unstructured.Unstructured{Object: input.Review.Object}, nil
}

// load runs the users against the current configuration and records the figure; srv and
// engine are the processes whose CPU is reported (nil: none in this configuration).
func (h *harness) load(ctx context.Context, config string, srv *server, engine *process) error {
	if h.loadUsers == 0 || h.benchObject == nil {
		return nil
	}
	objects, err := h.loadObjects()
	if err != nil {
		return err
	}
	if err := h.ensureServiceAccounts(ctx, objects); err != nil {
		return err
	}
	client, err := h.unthrottledClient()
	if err != nil {
		return err
	}
	cpuOf := func(proc *process) float64 {
		if proc == nil || proc.cmd.Process == nil {
			return -1
		}
		return processCPU(proc.cmd.Process.Pid)
	}
	serveProc := (*process)(nil)
	refusedBefore := 0.0
	if srv != nil {
		serveProc = srv.proc
		refusedBefore = srv.metric("meshlife_refusals_total{")
	}
	serveBefore, engineBefore, apiBefore, busyBefore := cpuOf(serveProc), cpuOf(engine), cpuOf(h.cp.api), machineBusy()
	started := time.Now()
	deadline := started.Add(h.loadDuration)
	var mu sync.Mutex
	var samples []time.Duration
	answers := map[string]int{}
	figure := loadFigure{config: config, users: h.loadUsers}
	var wg sync.WaitGroup
	for user := 0; user < h.loadUsers; user++ {
		wg.Add(1)
		go func(user int) {
			defer wg.Done()
			for iteration := 0; time.Now().Before(deadline); iteration++ {
				for kind, template := range objects {
					obj := template.DeepCopy()
					obj.SetName(fmt.Sprintf("load-%d-%d-%d", user, iteration, kind))
					begun := time.Now()
					v := verdictOf(client.create(ctx, obj, false))
					took := time.Since(begun)
					mu.Lock()
					samples = append(samples, took)
					answers[v.wordWithRules()]++
					if v.err != nil {
						figure.errors++
						if figure.firstError == "" {
							figure.firstError = truncate(v.err.Error(), 300)
						}
					}
					mu.Unlock()
				}
			}
		}(user)
	}
	wg.Wait()
	figure.duration = time.Since(started)
	figure.serveCPU = cpuDelta(serveBefore, cpuOf(serveProc))
	figure.engineCPU = cpuDelta(engineBefore, cpuOf(engine))
	figure.apiServerCPU = cpuDelta(apiBefore, cpuOf(h.cp.api))
	figure.machineBusy = machineBusy() - busyBefore
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	figure.admissions = len(samples)
	figure.answers = answers
	if n := len(samples); n > 0 {
		figure.p50, figure.p95, figure.p99, figure.max = samples[n/2], samples[(n*95)/100], samples[(n*99)/100], samples[n-1]
	}
	h.loadFigures = append(h.loadFigures, figure)
	fmt.Printf("  load  %-44s %d users %.0fs: %d admissions (%.0f/s)  p50 %.2f  p95 %.2f  p99 %.2f  max %.2f ms  errors %d  %v\n",
		config, figure.users, figure.duration.Seconds(), figure.admissions, float64(figure.admissions)/figure.duration.Seconds(),
		ms(figure.p50), ms(figure.p95), ms(figure.p99), ms(figure.max), figure.errors, answers)
	if figure.firstError != "" {
		fmt.Printf("        first error: %s\n", figure.firstError)
	}
	if srv != nil {
		fmt.Printf("        meshlife serve refused %.0f connections or requests (connections given way included)\n", srv.metric("meshlife_refusals_total{")-refusedBefore)
		h.checkJudged(fmt.Sprintf("%s under load", config), answers)
	}
	return h.deleteLoadObjects(ctx)
}

// deleteLoadObjects removes what a load run created, and waits until it is gone, so that the
// next configuration starts from the same cluster.
func (h *harness) deleteLoadObjects(ctx context.Context) error {
	background := metav1.DeletePropagationBackground
	options := metav1.DeleteOptions{PropagationPolicy: &background}
	list := metav1.ListOptions{}
	if err := h.k.core.CoreV1().Pods(benchNamespace).DeleteCollection(ctx, options, list); err != nil {
		return fmt.Errorf("deleting the load's Pods: %w", err)
	}
	if err := h.k.core.AppsV1().Deployments(benchNamespace).DeleteCollection(ctx, options, list); err != nil {
		return fmt.Errorf("deleting the load's Deployments: %w", err)
	}
	return waitUntil(ctx, 120*time.Second, "the load's objects deleted", func() (bool, error) {
		pods, err := h.k.core.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		deployments, err := h.k.core.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(deployments.Items) == 0, nil
	})
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux architecture
// Go supports.
const clockTicks = 100

// processCPU is the CPU time (user and system) a process has used, in seconds; -1 when it
// cannot be read.
func processCPU(pid int) float64 {
	fields, ok := procStat(pid)
	// utime and stime are fields 14 and 15.
	if !ok || len(fields) < 13 {
		return -1
	}
	user, err1 := strconv.ParseFloat(fields[14-3], 64)
	system, err2 := strconv.ParseFloat(fields[15-3], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (user + system) / clockTicks
}

// machineBusy is the CPU time the whole machine has spent not idle, in seconds, from
// /proc/stat's cpu line.
func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line := strings.SplitN(string(data), "\n", 2)[0]
	fields := strings.Fields(line)
	busy := 0.0
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for index, field := range fields[1:] {
		if index == 3 || index == 4 || index > 7 {
			continue
		}
		value, _ := strconv.ParseFloat(field, 64)
		busy += value
	}
	return busy / clockTicks
}

func cpuDelta(before, after float64) float64 {
	if before < 0 || after < 0 {
		return -1
	}
	return after - before
}

// loadTable is the Markdown table of every load figure.
func (h *harness) loadTable() string {
	var b strings.Builder
	b.WriteString("| configuration | users | admissions | per s | p50 ms | p95 ms | p99 ms | max ms | errors | meshlife serve CPU | engine CPU | API server CPU | everything else | machine busy |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range h.loadFigures {
		seconds := f.duration.Seconds()
		share := func(cpu float64) string {
			if cpu < 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f cores (%.0f%%)", cpu/seconds, 100*cpu/f.machineBusy)
		}
		// etcd, the client, and what an engine runs beside its admission controller (Kyverno's
		// reports controller, which turns each admission's report into PolicyReports).
		rest := f.machineBusy
		for _, cpu := range []float64{f.serveCPU, f.engineCPU, f.apiServerCPU} {
			if cpu > 0 {
				rest -= cpu
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %s | %s | %s | %s | %.2f cores |\n",
			f.config, f.users, f.admissions, float64(f.admissions)/seconds, ms(f.p50), ms(f.p95), ms(f.p99), ms(f.max),
			f.errors, share(f.serveCPU), share(f.engineCPU), share(f.apiServerCPU), share(rest), f.machineBusy/seconds)
	}
	return b.String()
}
