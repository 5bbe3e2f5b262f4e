package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one program the harness started, in its own process group, its output in a log
// file of the work folder.
type process struct {
	name    string
	cmd     *exec.Cmd
	logFile string
	done    chan struct{}
	err     error
}

// processes are every program started, stopped in reverse order on every way out: the end of
// the run, a failure, or a signal to the harness.
type processes struct {
	mu      sync.Mutex
	running []*process
	logDir  string
	// teardowns run before the processes are stopped, last registered first: what undoes a
	// stage's changes to the host in its own order (the node's), on every way out.
	teardowns []func()
}

// beforeStop registers a teardown that stopAll runs before it stops the remaining processes.
func (p *processes) beforeStop(teardown func()) {
	p.mu.Lock()
	p.teardowns = append(p.teardowns, teardown)
	p.mu.Unlock()
}

func newProcesses(logDir string) *processes {
	p := &processes{logDir: logDir}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		got := <-signals
		fmt.Fprintf(os.Stderr, "cluster-compat: %v: stopping everything started\n", got)
		p.stopAll()
		os.Exit(2)
	}()
	return p
}

// start runs name's program with args and env added to the harness's environment.
func (p *processes) start(name, program string, args []string, env []string) (*process, error) {
	logFile := filepath.Join(p.logDir, name+".log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(program, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(out, "\n=== %s %s\n", time.Now().Format(time.RFC3339), strings.Join(append([]string{program}, args...), " "))
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	proc := &process{name: name, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		out.Close()
		close(proc.done)
	}()
	p.mu.Lock()
	p.running = append(p.running, proc)
	p.mu.Unlock()
	return proc, nil
}

func (proc *process) exited() bool {
	select {
	case <-proc.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and waits up to grace before SIGKILL; it returns
// how long the process took to exit.
func (proc *process) stop(grace time.Duration) time.Duration {
	started := time.Now()
	if proc.exited() {
		return 0
	}
	_ = syscall.Kill(-proc.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-proc.done:
	case <-time.After(grace):
		_ = syscall.Kill(-proc.cmd.Process.Pid, syscall.SIGKILL)
		<-proc.done
	}
	return time.Since(started)
}

// tail is the last lines of the process's log, for an error message.
func (proc *process) tail(lines int) string {
	data, err := os.ReadFile(proc.logFile)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (p *processes) forget(proc *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, candidate := range p.running {
		if candidate == proc {
			p.running = append(p.running[:i], p.running[i+1:]...)
			return
		}
	}
}

func (p *processes) stopAll() {
	p.mu.Lock()
	teardowns := p.teardowns
	p.teardowns = nil
	p.mu.Unlock()
	for i := len(teardowns) - 1; i >= 0; i-- {
		teardowns[i]()
	}
	p.mu.Lock()
	running := append([]*process(nil), p.running...)
	p.running = nil
	p.mu.Unlock()
	for i := len(running) - 1; i >= 0; i-- {
		running[i].stop(10 * time.Second)
	}
}

// portsGiven are the ports freePort has handed out in this run: the kernel may hand a port
// that was closed a moment ago out again, and a server given one port for two listeners (its
// routes and its health) cannot start.
var portsGiven = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort is a loopback port nothing listens on at the moment it is asked, and one no caller
// in this run has been given before.
func freePort() (int, error) {
	portsGiven.Lock()
	defer portsGiven.Unlock()
	for attempt := 0; attempt < 100; attempt++ {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := listener.Addr().(*net.TCPAddr).Port
		listener.Close()
		if !portsGiven.ports[port] {
			portsGiven.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no loopback port that this run has not been given already, in 100 tries")
}

// waitHTTP polls url until it answers 200, the process exits, or timeout passes.
func waitHTTP(ctx context.Context, proc *process, url string, timeout time.Duration) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if proc != nil && proc.exited() {
			return fmt.Errorf("%s exited (%v) before %s answered; its log ends:\n%s", proc.name, proc.err, url, proc.tail(20))
		}
		response, err := client.Get(url)
		if err == nil {
			response.Body.Close()
			if response.StatusCode == http.StatusOK {
				return nil
			}
			last = response.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	name := "it"
	if proc != nil {
		name = proc.name
	}
	return fmt.Errorf("%s: %s did not answer 200 within %v (last: %s)", name, url, timeout, last)
}

// procStat reads /proc/PID/stat's fields from the third (the state) on, so that field N of
// proc(5) is fields[N-3]; false when the process does not exist. The command name (field 2)
// is in parentheses and may hold spaces, so the fields are counted from after it.
func procStat(pid int) ([]string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	text := string(data)
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return nil, false
	}
	return strings.Fields(text[end+1:]), true
}
