package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------- helpers

// event is one parsed output line.
type event struct {
	ts   time.Time
	name string
	kv   map[string]string
	line string
}

func (e event) int(t *testing.T, key string) int {
	t.Helper()
	v, ok := e.kv[key]
	if !ok {
		t.Fatalf("event %q has no %s", e.line, key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("event %q: %s=%q is not an int", e.line, key, v)
	}
	return n
}

// parseLine parses "<RFC3339Nano> <event> k=v k="quoted v" ...".
func parseLine(line string) (event, error) {
	ev := event{kv: map[string]string{}, line: line}
	tsText, rest, ok := strings.Cut(line, " ")
	if !ok {
		return ev, fmt.Errorf("no event word")
	}
	ts, err := time.Parse(time.RFC3339Nano, tsText)
	if err != nil {
		return ev, err
	}
	if len(tsText) != len("2006-01-02T15:04:05.000000000Z") || !strings.HasSuffix(tsText, "Z") {
		return ev, fmt.Errorf("timestamp %q is not fixed-width UTC", tsText)
	}
	ev.ts = ts
	ev.name, rest, _ = strings.Cut(rest, " ")
	if ev.name == "" || strings.Contains(ev.name, "=") {
		return ev, fmt.Errorf("bad event word %q", ev.name)
	}
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return ev, fmt.Errorf("bad key/value at %q", rest)
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return ev, fmt.Errorf("bad quoted value at %q: %v", after, err)
			}
			val, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			val, after, _ = strings.Cut(after, " ")
			after = " " + after
			if after == " " {
				after = ""
			}
		}
		ev.kv[key] = val
		if after != "" {
			if after[0] != ' ' {
				return ev, fmt.Errorf("no space after value in %q", line)
			}
			after = after[1:]
		}
		rest = after
	}
	return ev, nil
}

// logBuf collects a run's stdout.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type proc struct {
	name   string
	out    *logBuf
	sigs   chan os.Signal
	cancel context.CancelFunc
	done   chan int
	code   int
	exited bool
}

// start runs the workload in-process with its own stdout and signals.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{name: strings.Join(args, " "), out: &logBuf{}, sigs: make(chan os.Signal, 4), cancel: cancel, done: make(chan int, 1)}
	go func() { p.done <- run(ctx, args, p.out, io.Discard, p.sigs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: still running 5s after kill", p.name)
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", p.name, p.out.String())
		}
	})
	return p
}

func (p *proc) term() { p.sigs <- syscall.SIGTERM }

// wait returns the exit status, failing the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	if p.exited {
		return p.code
	}
	select {
	case p.code = <-p.done:
		p.exited = true
		p.done <- p.code // for the cleanup
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s: did not exit within %s\n%s", p.name, timeout, p.out.String())
		return 0
	}
}

func (p *proc) events(t *testing.T) []event {
	t.Helper()
	var evs []event
	for _, line := range strings.Split(strings.TrimSuffix(p.out.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		ev, err := parseLine(line)
		if err != nil {
			t.Fatalf("%s: bad line %q: %v", p.name, line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func (p *proc) find(t *testing.T, name string, match func(event) bool) (event, bool) {
	t.Helper()
	for _, ev := range p.events(t) {
		if ev.name == name && (match == nil || match(ev)) {
			return ev, true
		}
	}
	return event{}, false
}

// waitFor polls the output until an event name (matching match) appears.
func (p *proc) waitFor(t *testing.T, name string, match func(event) bool) event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ev, ok := p.find(t, name, match); ok {
			return ev
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: no %s event within 5s\n%s", p.name, name, p.out.String())
	return event{}
}

func (p *proc) all(t *testing.T, name string) []event {
	t.Helper()
	var out []event
	for _, ev := range p.events(t) {
		if ev.name == name {
			out = append(out, ev)
		}
	}
	return out
}

// addr waits for the listening event of proto and returns its address.
func (p *proc) addr(t *testing.T, proto string) string {
	t.Helper()
	return p.waitFor(t, "listening", func(e event) bool { return e.kv["proto"] == proto }).kv["addr"]
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// assertOrder checks that the named events occur in this order.
func assertOrder(t *testing.T, p *proc, names ...string) {
	t.Helper()
	i := 0
	for _, ev := range p.events(t) {
		if i < len(names) && ev.name == names[i] {
			i++
		}
	}
	if i != len(names) {
		t.Fatalf("%s: events %v not in order (matched %d)\n%s", p.name, names, i, p.out.String())
	}
}

// ---------------------------------------------------------------- tests

func TestFormat(t *testing.T) {
	var b logBuf
	l := &logger{w: &b}
	l.event("demo", "a", 1, "b", "two words", "c", "", "d", `q"x`, "e", 1500*time.Microsecond, "f", "k=v", "g", 602*time.Microsecond)
	ev, err := parseLine(strings.TrimSuffix(b.String(), "\n"))
	if err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	want := map[string]string{"a": "1", "b": "two words", "c": "", "d": `q"x`, "e": "1.5ms", "f": "k=v", "g": "602us"}
	for k, v := range want {
		if ev.kv[k] != v {
			t.Errorf("%s=%q, want %q (line %q)", k, ev.kv[k], v, b.String())
		}
	}
	if !strings.Contains(b.String(), ` b="two words" c="" `) || !strings.Contains(b.String(), " g=602us") {
		t.Errorf("unexpected quoting: %q", b.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"serve", "-bogus"},
		{"serve", "extra"},
		{"call"},
		{"call", "-url", "http://127.0.0.1:1/", "-then", "dance"},
		{"job", "-url", "http://127.0.0.1:1/", "-then", "serve"},
		{"ws-client", "-url", "http://127.0.0.1:1/ws"},
		{"grpc-client"},
	} {
		p := start(t, args...)
		if code := p.wait(t, 2*time.Second); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		p.waitFor(t, "usage-error", nil)
		assertOrder(t, p, "started", "usage-error")
	}
}

// The caller starts before anything listens: the first calls fail, then a
// server appears and the remaining calls succeed.
func TestCallFailsThenSucceeds(t *testing.T) {
	addr := freeAddr(t)
	const count = 30
	c := start(t, "call", "-url", "http://"+addr+"/", "-count", strconv.Itoa(count), "-interval", "25ms", "-timeout", "500ms")
	c.waitFor(t, "call-failed", func(e event) bool { return e.kv["n"] == "3" })
	s := start(t, "serve", "-listen", addr)
	if got := s.addr(t, "http"); got != addr {
		t.Fatalf("serve listens on %s, want %s", got, addr)
	}
	if code := c.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("call exit %d", code)
	}
	sum := c.waitFor(t, "calls", nil)
	first := sum.int(t, "first-ok-n")
	if sum.int(t, "total") != count || sum.int(t, "ok")+sum.int(t, "failed") != count {
		t.Fatalf("bad summary %q", sum.line)
	}
	if first <= 3 || first > count-5 {
		t.Fatalf("first-ok-n=%d, want in (3, %d]", first, count-5)
	}
	if sum.int(t, "failed") != first-1 {
		t.Fatalf("failed=%d, want %d (all before first-ok-n, none after)", sum.int(t, "failed"), first-1)
	}
	for _, ev := range c.all(t, "call-failed") {
		if n := ev.int(t, "n"); n >= first {
			t.Errorf("call %d failed after first ok %d: %s", n, first, ev.line)
		}
		if !strings.Contains(ev.kv["error"], "connection refused") {
			t.Errorf("unexpected error: %s", ev.line)
		}
	}
	for _, ev := range c.all(t, "call-ok") {
		if ev.kv["status"] != "200" {
			t.Errorf("unexpected status: %s", ev.line)
		}
	}
	assertOrder(t, c, "started", "call-failed", "call-ok", "calls", "exit")
	s.term()
	if code := s.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

func TestServeSigterm(t *testing.T) {
	// A backend the terminating server calls during its shutdown.
	b := start(t, "serve", "-listen", "127.0.0.1:0")
	backend := b.addr(t, "http")

	s := start(t, "serve", "-listen", "127.0.0.1:0", "-ready-after", "150ms", "-unready-on-term",
		"-shutdown-delay", "300ms", "-drain", "1s", "-exit-code", "7",
		"-call-on-term", "http://"+backend+"/", "-call-on-term-every", "50ms")
	addr := s.addr(t, "http")
	if st := httpStatus(t, "http://"+addr+"/ready"); st != 503 {
		t.Fatalf("/ready before -ready-after: %d, want 503", st)
	}
	s.waitFor(t, "ready", nil)
	if st := httpStatus(t, "http://"+addr+"/ready"); st != 200 {
		t.Fatalf("/ready: %d, want 200", st)
	}
	s.term()
	s.waitFor(t, "unready", nil)
	if st := httpStatus(t, "http://"+addr+"/ready"); st != 503 {
		t.Fatalf("/ready after SIGTERM: %d, want 503", st)
	}
	if st := httpStatus(t, "http://"+addr+"/"); st != 200 {
		t.Fatalf("/ during -shutdown-delay: %d, want 200", st)
	}
	if code := s.wait(t, 5*time.Second); code != 7 {
		t.Fatalf("exit %d, want 7", code)
	}
	assertOrder(t, s, "started", "listening", "ready", "sigterm", "unready", "shutdown-start", "exit")
	calls := 0
	for _, ev := range s.all(t, "call-ok") {
		if ev.kv["phase"] == "term" {
			calls++
		}
	}
	if calls < 3 {
		t.Fatalf("only %d call-ok phase=term events during a 300ms delay\n%s", calls, s.out.String())
	}
	sig, _ := s.find(t, "sigterm", nil)
	sd, _ := s.find(t, "shutdown-start", nil)
	if d := sd.ts.Sub(sig.ts); d < 290*time.Millisecond {
		t.Fatalf("shutdown-start %s after sigterm, want >= 300ms", d)
	}
	b.term()
	b.wait(t, 5*time.Second)
}

// An app still loading: nothing listens until -listen-after, then it serves; a SIGTERM while it
// loads ends it at once.
func TestServeListenAfter(t *testing.T) {
	s := start(t, "serve", "-listen", "127.0.0.1:0", "-listen-after", "300ms")
	loading := s.waitFor(t, "loading", nil)
	listening := s.waitFor(t, "listening", nil)
	if d := listening.ts.Sub(loading.ts); d < 290*time.Millisecond {
		t.Fatalf("listening %s after loading, want >= 300ms", d)
	}
	if st := httpStatus(t, "http://"+s.addr(t, "http")+"/"); st != 200 {
		t.Fatalf("/ once listening: %d, want 200", st)
	}
	s.term()
	if code := s.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}

	early := start(t, "serve", "-listen", "127.0.0.1:0", "-listen-after", "1m")
	early.waitFor(t, "loading", nil)
	early.term()
	if code := early.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit %d after a SIGTERM while loading, want 0", code)
	}
	assertOrder(t, early, "started", "loading", "sigterm", "exit")
	if _, found := early.find(t, "listening", nil); found {
		t.Fatalf("listened after a SIGTERM while loading\n%s", early.out.String())
	}
}

// An in-flight request outlives -drain: drain-timeout, the request is cut.
func TestServeDrainTimeout(t *testing.T) {
	s := start(t, "serve", "-listen", "127.0.0.1:0", "-drain", "100ms")
	addr := s.addr(t, "http")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/delay?d=3s")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.term()
	if code := s.wait(t, 2*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if err := <-errc; err == nil {
		t.Fatal("the in-flight request got an answer, want it cut")
	}
	assertOrder(t, s, "sigterm", "shutdown-start", "drain-timeout", "exit")
}

func TestCallThenServeAndQuit(t *testing.T) {
	s := start(t, "serve", "-listen", "127.0.0.1:0", "-log-requests")
	backend := s.addr(t, "http")
	c := start(t, "call", "-url", "http://"+backend+"/", "-count", "2", "-interval", "10ms",
		"-quit-url", "http://"+backend+"/quitquitquit", "-then", "serve", "-listen", "127.0.0.1:0")
	addr := c.addr(t, "http")
	c.waitFor(t, "ready", nil)
	if st := httpStatus(t, "http://"+addr+"/ready"); st != 200 {
		t.Fatalf("/ready: %d", st)
	}
	q := c.waitFor(t, "quit", nil)
	if q.kv["status"] != "200" {
		t.Fatalf("quit: %s", q.line)
	}
	s.waitFor(t, "request", func(e event) bool { return e.kv["method"] == "POST" && e.kv["path"] == "/quitquitquit" })
	c.term()
	if code := c.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	assertOrder(t, c, "started", "listening", "call-ok", "call-ok", "calls", "quit", "ready", "sigterm", "shutdown-start", "exit")
	s.term()
	s.wait(t, 5*time.Second)
}

func TestJobFailExitCode(t *testing.T) {
	addr := freeAddr(t)
	j := start(t, "job", "-url", "http://"+addr+"/", "-count", "2", "-interval", "10ms", "-fail-exit-code", "5")
	if code := j.wait(t, 5*time.Second); code != 5 {
		t.Fatalf("exit %d, want 5", code)
	}
	sum := j.waitFor(t, "calls", nil)
	if sum.kv["first-ok-n"] != "0" || sum.kv["failed"] != "2" {
		t.Fatalf("summary %s", sum.line)
	}
}

// The gRPC server exits under an open stream: the client sees the stream
// broken (or cleanly closed with -end-on-term) and reports its count.
func TestGRPCStreamAtServerExit(t *testing.T) {
	cases := []struct {
		name       string
		serverArgs []string
		want       string // client event
		wantReason string // server stream-end reason
		drainTO    bool
	}{
		{"stop", []string{"-drain", "0"}, "stream-broken", "server-stop", false},
		{"drain-timeout", []string{"-drain", "150ms"}, "stream-broken", "server-stop", true},
		{"end-on-term", []string{"-drain", "2s", "-end-on-term"}, "stream-closed", "server-shutdown", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, append([]string{"grpc-server", "-listen", "127.0.0.1:0", "-every", "10ms"}, tc.serverArgs...)...)
			addr := s.addr(t, "grpc")
			c := start(t, "grpc-client", "-target", addr, "-listen", "", "-exit-on-end")
			c.waitFor(t, "stream-open", nil)
			s.waitFor(t, "stream-start", nil)
			time.Sleep(150 * time.Millisecond)
			s.term()
			if code := s.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("server exit %d", code)
			}
			if code := c.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("client exit %d", code)
			}
			end := s.waitFor(t, "stream-end", nil)
			if end.kv["reason"] != tc.wantReason {
				t.Fatalf("server: %s, want reason=%s", end.line, tc.wantReason)
			}
			if _, ok := s.find(t, "drain-timeout", nil); ok != tc.drainTO {
				t.Fatalf("drain-timeout logged=%v, want %v", ok, tc.drainTO)
			}
			assertOrder(t, s, "started", "listening", "stream-start", "sigterm", "shutdown-start", "stream-end", "exit")
			got := c.waitFor(t, tc.want, nil)
			sent, received := end.int(t, "sent"), got.int(t, "received")
			if received < 5 || received > sent {
				t.Fatalf("client received=%d, server sent=%d", received, sent)
			}
			if tc.want == "stream-closed" && received != sent {
				t.Fatalf("clean end: received=%d != sent=%d", received, sent)
			}
			if tc.want == "stream-broken" && got.kv["code"] != "Unavailable" {
				t.Fatalf("client: %s, want code=Unavailable", got.line)
			}
			assertOrder(t, c, "started", "stream-open", tc.want, "exit")
		})
	}
}

func TestGRPCClientReconnects(t *testing.T) {
	s1 := start(t, "grpc-server", "-listen", "127.0.0.1:0", "-every", "10ms", "-drain", "0")
	addr := s1.addr(t, "grpc")
	c := start(t, "grpc-client", "-target", addr, "-listen", "", "-reconnect", "-reconnect-delay", "50ms")
	c.waitFor(t, "stream-open", func(e event) bool { return e.kv["n"] == "1" })
	s1.term()
	s1.wait(t, 5*time.Second)
	c.waitFor(t, "stream-broken", func(e event) bool { return e.kv["n"] == "1" })
	c.waitFor(t, "stream-open-failed", nil) // nothing listens for a while
	s2 := start(t, "grpc-server", "-listen", addr, "-every", "10ms")
	s2.addr(t, "grpc")
	open := c.waitFor(t, "stream-open", func(e event) bool { return e.kv["n"] != "1" })
	c.term()
	if code := c.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("client exit %d", code)
	}
	c.waitFor(t, "stream-cancelled", func(e event) bool { return e.kv["n"] == open.kv["n"] })
	assertOrder(t, c, "stream-open", "stream-broken", "stream-open-failed", "stream-open", "sigterm", "stream-cancelled", "exit")
	s2.waitFor(t, "stream-end", func(e event) bool { return e.kv["reason"] == "client-gone" })
	s2.term()
	s2.wait(t, 5*time.Second)
}

// WebSocket: close code 1001 with -close-on-term, 1006 (abnormal) without.
func TestWSCloseCodes(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		closeCode  string
		wantReason string
	}{
		{"close-on-term", []string{"-close-on-term"}, "1001", "server-close"},
		{"drop", nil, "1006", "server-exit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, append([]string{"ws-server", "-listen", "127.0.0.1:0", "-every", "10ms", "-drain", "1s"}, tc.args...)...)
			addr := s.addr(t, "ws")
			c := start(t, "ws-client", "-url", "ws://"+addr+"/ws", "-listen", "", "-exit-on-end")
			c.waitFor(t, "ws-open", nil)
			s.waitFor(t, "ws-accept", nil)
			time.Sleep(100 * time.Millisecond)
			s.term()
			if code := s.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("server exit %d", code)
			}
			if code := c.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("client exit %d", code)
			}
			end := s.waitFor(t, "ws-end", nil)
			if end.kv["reason"] != tc.wantReason {
				t.Fatalf("server: %s, want reason=%s", end.line, tc.wantReason)
			}
			br := c.waitFor(t, "ws-broken", nil)
			if br.kv["close-code"] != tc.closeCode {
				t.Fatalf("client: %s, want close-code=%s", br.line, tc.closeCode)
			}
			if r, sent := br.int(t, "received"), end.int(t, "sent"); r < 3 || r > sent {
				t.Fatalf("received=%d sent=%d", r, sent)
			}
			assertOrder(t, s, "started", "listening", "ws-accept", "sigterm", "shutdown-start", "ws-end", "exit")
			assertOrder(t, c, "started", "ws-open", "ws-broken", "exit")
		})
	}
}

// SIGTERM handling of the modes not covered above.
func TestSigterm(t *testing.T) {
	t.Run("sleep", func(t *testing.T) {
		p := start(t, "sleep", "-shutdown-delay", "100ms", "-exit-code", "3")
		p.waitFor(t, "started", nil)
		p.term()
		if code := p.wait(t, 2*time.Second); code != 3 {
			t.Fatalf("exit %d", code)
		}
		assertOrder(t, p, "started", "sigterm", "exit")
	})
	t.Run("sleep-ignore-term", func(t *testing.T) {
		p := start(t, "sleep", "-ignore-term")
		p.term()
		p.term()
		p.waitFor(t, "sigterm-ignored", func(e event) bool { return e.kv["n"] == "2" })
		select {
		case code := <-p.done:
			t.Fatalf("exited (%d) despite -ignore-term", code)
		case <-time.After(100 * time.Millisecond):
		}
		p.cancel() // the SIGKILL stand-in
		if code := p.wait(t, 2*time.Second); code != exitKilled {
			t.Fatalf("exit %d", code)
		}
		if _, ok := p.find(t, "exit", nil); ok {
			t.Fatal("exit logged after kill")
		}
	})
	t.Run("ws-client", func(t *testing.T) {
		s := start(t, "ws-server", "-listen", "127.0.0.1:0", "-every", "10ms")
		c := start(t, "ws-client", "-url", "ws://"+s.addr(t, "ws")+"/ws", "-listen", "127.0.0.1:0")
		if st := httpStatus(t, "http://"+c.addr(t, "http")+"/ready"); st != 200 {
			t.Fatalf("/ready %d", st)
		}
		c.waitFor(t, "ws-open", nil)
		c.term()
		if code := c.wait(t, 2*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		assertOrder(t, c, "ws-open", "sigterm", "ws-cancelled", "exit")
		end := s.waitFor(t, "ws-end", nil)
		if end.kv["reason"] != "client-closed" || end.kv["close-code"] != "1000" {
			t.Fatalf("server: %s", end.line)
		}
		s.term()
		s.wait(t, 2*time.Second)
	})
	t.Run("call-aborted", func(t *testing.T) {
		s := start(t, "serve", "-listen", "127.0.0.1:0")
		c := start(t, "call", "-url", "http://"+s.addr(t, "http")+"/", "-count", "0", "-interval", "20ms")
		c.waitFor(t, "call-ok", func(e event) bool { return e.kv["n"] == "2" })
		c.term()
		if code := c.wait(t, 2*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		sum := c.waitFor(t, "calls", nil)
		if sum.kv["aborted"] != "true" || sum.kv["failed"] != "0" {
			t.Fatalf("summary %s", sum.line)
		}
		s.term()
		s.wait(t, 2*time.Second)
	})
}

// Called as sleep, the binary is sleep(1): seconds, a unit suffix, and a clear error otherwise.
func TestSleepCommand(t *testing.T) {
	var errw strings.Builder
	started := time.Now()
	if code := sleepCommand([]string{"0.2"}, &errw); code != 0 || time.Since(started) < 200*time.Millisecond {
		t.Fatalf("sleep 0.2: exit %d after %s (%s)", code, time.Since(started), errw.String())
	}
	if code := sleepCommand([]string{"50ms"}, &errw); code != 0 {
		t.Fatalf("sleep 50ms: exit %d (%s)", code, errw.String())
	}
	for _, args := range [][]string{{}, {"soon"}, {"-1"}, {"1", "2"}} {
		errw.Reset()
		if code := sleepCommand(args, &errw); code != 1 || errw.Len() == 0 {
			t.Errorf("sleep %q: exit %d, stderr %q; want exit 1 with a message", args, code, errw.String())
		}
	}
}

func TestServeExitAfterOnce(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "exited")
	args := []string{"serve", "-listen", "127.0.0.1:0", "-exit-after", "200ms", "-exit-after-code", "88", "-exit-once", marker}
	first := start(t, args...)
	if code := first.wait(t, 5*time.Second); code != 88 {
		t.Fatalf("first run exited %d, want 88", code)
	}
	second := start(t, args...)
	second.waitFor(t, "exit-skipped", func(event) bool { return true })
	second.term()
	if code := second.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("second run exited %d, want 0", code)
	}
}
