package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// scenarioFile is the example whose Job each engine refuses while its Namespace injects Istio
// and admits once it does not.
const scenarioFile = "examples/istio/job-classic-no-exit.yaml"

// scenario is that Job in a Namespace of the harness's own, whose injection label the checks
// turn on and off, with check's verdict for each state.
type scenario struct {
	h         *harness
	namespace string
	job       *unstructured.Unstructured
	want      map[string]expectation
	// splitCall, when set, recognises an answer made of two calls of the same object that the
	// stop's instant split, one answered and one refused: the CEL pair's errors policy calls in
	// its match condition and again in its validation, the warnings policy once, each on its own
	// connection. With one server and no endpoint to move to (a Deployment's other replicas),
	// the listener's close falls between them for a few objects of a burst.
	splitCall func(verdict) bool
}

func (h *harness) newScenario(namespace, cluster string) (*scenario, error) {
	data, err := os.ReadFile(filepath.Join(h.repo, scenarioFile))
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, err
	}
	s := &scenario{h: h, namespace: namespace, want: map[string]expectation{}}
	for _, obj := range objs {
		if obj.GetKind() == "Job" {
			s.job = obj.DeepCopy()
			s.job.SetNamespace(namespace)
		}
	}
	if s.job == nil {
		return nil, fmt.Errorf("%s holds no Job", scenarioFile)
	}
	// check's verdict on the same Job with the Namespace in each state.
	for _, state := range []string{"enabled", "disabled"} {
		ns := s.namespaceObject(state)
		nsJSON, _ := ns.MarshalJSON()
		jobJSON, _ := s.job.MarshalJSON()
		file := filepath.Join(h.dir, fmt.Sprintf("scenario-%s-%s.json", namespace, state))
		list := fmt.Sprintf(`{"apiVersion":"v1","kind":"List","items":[%s,%s]}`, nsJSON, jobJSON)
		if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
			return nil, err
		}
		findings, err := meshlifeCheck(h.meshlife, h.repo, cluster, []string{file})
		if err != nil {
			return nil, err
		}
		var e expectation
		for _, f := range findings {
			switch f.EnforcementAction {
			case "deny":
				e.deny = append(e.deny, f)
			case "warn":
				e.warn = append(e.warn, f)
			}
		}
		s.want[state] = e
	}
	if s.want["enabled"].word() == s.want["disabled"].word() {
		return nil, fmt.Errorf("meshlife check says %s of %s whatever the injection label: the scenario shows nothing", s.want["enabled"].word(), scenarioFile)
	}
	if err := ensureNamespace(context.Background(), h.k, namespace); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *scenario) namespaceObject(state string) *unstructured.Unstructured {
	ns := objectFor("v1", "Namespace", "", s.namespace)
	ns.SetLabels(map[string]string{"istio-injection": state})
	return ns
}

func (s *scenario) label(ctx context.Context, state string) error {
	_, err := s.h.k.apply(ctx, s.namespaceObject(state))
	return err
}

// converge waits until the engine's verdict on the Job is check's for the state, and says
// how long that took.
func (s *scenario) converge(ctx context.Context, state string, timeout time.Duration) (time.Duration, error) {
	started := time.Now()
	var last []string
	err := waitUntil(ctx, timeout, fmt.Sprintf("the verdict with istio-injection=%s", state), func() (bool, error) {
		v := verdictOf(s.h.k.create(ctx, s.job, true))
		last = compare(s.want[state], v, false)
		if len(last) == 0 {
			return true, nil
		}
		return false, fmt.Errorf("%s", strings.Join(last, "; "))
	})
	return time.Since(started), err
}

// relabelCheck: injection on, off, and on again changes the next verdicts, with no restart.
func (s *scenario) relabelCheck(ctx context.Context, engine string) {
	h := s.h
	var took []string
	ok := true
	for _, state := range []string{"enabled", "disabled", "enabled"} {
		if err := s.label(ctx, state); err != nil {
			h.fail("%s: relabelling %s: %v", engine, s.namespace, err)
			return
		}
		d, err := s.converge(ctx, state, 30*time.Second)
		if err != nil {
			h.fail("%s: %v", engine, err)
			ok = false
			continue
		}
		took = append(took, fmt.Sprintf("%s (%s) in %.1fs", state, s.want[state].word(), d.Seconds()))
	}
	if ok {
		h.pass("%s: relabelling the Namespace changes the next verdict, no restart: %s", engine, strings.Join(took, ", "))
	}
}

// burst sends n dry-run creates of the scenario's Job (distinct names) at concurrency c and
// counts the answers: judged (check's verdict), unjudged (admitted as the failure policy
// admits an object the server could not judge) and any other answer. during runs after the
// first tenth has been answered.
type burstCounts struct {
	judged, unjudged, other, splitCall int64
	otherSamples                       []string
}

func (s *scenario) burst(ctx context.Context, n, c int, unjudged func(verdict) bool, during func()) *burstCounts {
	counts := &burstCounts{}
	var next, done int64
	var once sync.Once
	var mu sync.Mutex
	var wg sync.WaitGroup
	for worker := 0; worker < c; worker++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				index := atomic.AddInt64(&next, 1)
				if index > int64(n) {
					return
				}
				job := s.job.DeepCopy()
				job.SetName(fmt.Sprintf("%s-%d", s.job.GetName(), index))
				v := verdictOf(s.h.k.create(ctx, job, true))
				switch {
				case len(compare(s.want["enabled"], v, false)) == 0:
					atomic.AddInt64(&counts.judged, 1)
				case unjudged(v):
					atomic.AddInt64(&counts.unjudged, 1)
				case s.splitCall != nil && s.splitCall(v):
					atomic.AddInt64(&counts.splitCall, 1)
				default:
					atomic.AddInt64(&counts.other, 1)
					mu.Lock()
					if len(counts.otherSamples) < 3 {
						counts.otherSamples = append(counts.otherSamples, fmt.Sprintf("%s %q %v %v", v.word(), v.message, v.warnings, v.err))
					}
					mu.Unlock()
				}
				if atomic.AddInt64(&done, 1) == int64(n/10) && during != nil {
					once.Do(func() {
						wg.Add(1)
						go func() {
							defer wg.Done()
							during()
						}()
					})
				}
			}
		}()
	}
	wg.Wait()
	return counts
}

// faultChecks: the server stalled (stallCheck); stopped, then back; SIGTERM during a burst;
// its certificate rotated during a burst. unjudged says what the failure policy makes of an object the
// server could not judge; rotate swaps the serving certificate for one the caller trusts.
func (s *scenario) faultChecks(ctx context.Context, engine string, srv **server, unjudged func(verdict) bool, restart func() error, rotate func() error) error {
	h := s.h
	if err := s.label(ctx, "enabled"); err != nil {
		return err
	}
	if _, err := s.converge(ctx, "enabled", 30*time.Second); err != nil {
		h.fail("%s: before the faults: %v", engine, err)
		return nil
	}
	s.stallCheck(ctx, engine, *srv, unjudged, time.Second, 12*time.Second)
	// Stopped: what the failure policy says.
	code := (*srv).stop()
	h.check(code == 0, "%s: meshlife serve stopped by SIGTERM exits 0 (exit %d)", engine, code)
	v := verdictOf(h.k.create(ctx, s.job, true))
	h.check(unjudged(v), "%s: with meshlife serve down, the Job is answered as the failure policy says: %s %q %v %v", engine, v.word(), oneLine(v.message), v.warnings, v.err)
	if err := restart(); err != nil {
		return err
	}
	v = verdictOf(h.k.create(ctx, s.job, true))
	problems := compare(s.want["enabled"], v, false)
	h.check(len(problems) == 0, "%s: the first admission once meshlife serve is back is judged %v", engine, problems)

	// SIGTERM during a burst of 500.
	var exitCode int
	counts := s.burst(ctx, 500, 8, unjudged, func() { exitCode = (*srv).stop() })
	h.check(counts.other == 0 && counts.splitCall <= 10 && exitCode == 0,
		"%s: SIGTERM during 500 admissions: %d judged, %d admitted unjudged as the failure policy allows, %d split between two calls by the stop (at most 10), %d other answers %v; serve exit %d",
		engine, counts.judged, counts.unjudged, counts.splitCall, counts.other, counts.otherSamples, exitCode)
	if err := restart(); err != nil {
		return err
	}
	if _, err := s.converge(ctx, "enabled", 30*time.Second); err != nil {
		h.fail("%s: after the restart: %v", engine, err)
	}

	// The certificate rotated during a burst: every admission judged.
	if rotate != nil {
		var rotateErr error
		reloads := (*srv).metric("meshlife_tls_reloads_total{outcome=\"reloaded\"}")
		counts = s.burst(ctx, 500, 8, func(verdict) bool { return false }, func() { rotateErr = rotate() })
		if rotateErr != nil {
			return rotateErr
		}
		// The reload is seen within the reload interval; a burst can be shorter.
		_ = waitUntil(ctx, 15*time.Second, "the certificate reload", func() (bool, error) {
			return (*srv).metric("meshlife_tls_reloads_total{outcome=\"reloaded\"}") > reloads, nil
		})
		after := verdictOf(h.k.create(ctx, s.job, true))
		h.check(counts.other == 0 && counts.splitCall == 0 && (*srv).metric("meshlife_tls_reloads_total{outcome=\"reloaded\"}") > reloads && len(compare(s.want["enabled"], after, false)) == 0,
			"%s: certificate rotated during 500 admissions: %d judged, %d not %v; reloads %.0f -> %.0f; judged after it",
			engine, counts.judged, counts.other+counts.splitCall, counts.otherSamples, reloads, (*srv).metric("meshlife_tls_reloads_total{outcome=\"reloaded\"}"))
	}
	return nil
}

// floodCheck holds idle connections to the server from one source (no TLS handshake: the
// cheapest flood any pod of a cluster can send) while the engine's own admissions go on: every
// one must still be judged, within the engine's timeout.
func (s *scenario) floodCheck(ctx context.Context, engine string, srv *server, idle int, timeout time.Duration) {
	h := s.h
	if err := s.label(ctx, "enabled"); err != nil {
		h.fail("%s: %v", engine, err)
		return
	}
	if _, err := s.converge(ctx, "enabled", 30*time.Second); err != nil {
		h.fail("%s: before the flood: %v", engine, err)
		return
	}
	var conns []net.Conn
	failedInARow := 0
	for attempt := 0; len(conns) < idle && failedInARow < 50 && attempt < 2*idle; attempt++ {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", srv.routesPort), 200*time.Millisecond)
		if err != nil {
			// The listen backlog is full while the server sheds: go on filling it.
			failedInARow++
			continue
		}
		failedInARow = 0
		conns = append(conns, conn)
	}
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	time.Sleep(time.Second)
	const n = 20
	judged := 0
	var slowest time.Duration
	for i := 0; i < n; i++ {
		job := s.job.DeepCopy()
		job.SetName(fmt.Sprintf("%s-flood-%d", s.job.GetName(), i))
		started := time.Now()
		v := verdictOf(h.k.create(ctx, job, true))
		if took := time.Since(started); took > slowest {
			slowest = took
		}
		if len(compare(s.want["enabled"], v, false)) == 0 {
			judged++
		}
	}
	shed := srv.metric(`meshlife_refusals_total{reason="connection_shed"}`)
	h.check(judged == n && slowest < timeout,
		"%s: %d idle connections held from one source: %d of %d admissions judged, the slowest in %v (the engine gives up at %v); %.0f connections shed",
		engine, len(conns), judged, n, slowest.Round(time.Millisecond), timeout, shed)
}
