package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is one live `meshlife serve` child process.
type server struct {
	cmd        *exec.Cmd
	port       int
	healthPort int
	stderr     *lockedBuffer
	exited     chan struct{}
	waitErr    error
}

// lockedBuffer collects the child's stderr while the harness reads it concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort asks the kernel for a port; the small window before meshlife binds it is
// acceptable on a machine where nothing else races for loopback ports.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startServer(binary string, p *pki, timeout time.Duration) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	healthPort, err := freePort()
	for err == nil && healthPort == port {
		healthPort, err = freePort()
	}
	if err != nil {
		return nil, err
	}
	s := &server{port: port, healthPort: healthPort, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(binary, "serve",
		"--listen", "127.0.0.1:"+strconv.Itoa(port),
		"--health-listen", "127.0.0.1:"+strconv.Itoa(healthPort),
		"--tls-cert", p.serverCert,
		"--tls-key", p.serverKey,
		"--client-ca", p.caCert,
		// Only /validate is exercised: no watch of whatever cluster the machine knows.
		"--no-namespace-watch",
	)
	s.cmd.Stdout = io.Discard
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", binary, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()

	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("meshlife serve exited before it was ready (%v); its stderr:\n%s", s.waitErr, s.stderr.String())
		default:
		}
		resp, err := probe.Get(ready)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("GET %s did not answer 200 within %s; meshlife serve's stderr:\n%s", ready, timeout, s.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) url() string {
	// 127.0.0.1 rather than localhost: the server listens on IPv4 only, and the IP SAN is
	// then what Go's hostname check matches.
	return fmt.Sprintf("https://127.0.0.1:%d/validate", s.port)
}

// stop sends SIGTERM, as the kubelet does, and reports how the server ended: a server that
// needs SIGKILL, or exits non-zero on SIGTERM, would lose in-flight admissions in a rollout.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return fmt.Errorf("meshlife serve had already exited: %v", s.waitErr)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.waitErr != nil {
			return fmt.Errorf("meshlife serve exited with %v after SIGTERM", s.waitErr)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("meshlife serve did not exit within 20 s of SIGTERM; killed")
	}
}

// validateRequests reads the server's own count of /validate requests, which is the number
// of provider calls Gatekeeper's client made: the client itself exposes no counter. -1 when
// the server has no such metric.
func (s *server) validateRequests() int64 {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", s.healthPort))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	var total int64
	found := false
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "# TYPE meshlife_requests_total ") {
			found = true
		}
		if !strings.HasPrefix(line, "meshlife_requests_total{") || !strings.Contains(line, `route="validate"`) {
			continue
		}
		fields := strings.Fields(line)
		value, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		total += int64(value)
	}
	if !found {
		return -1
	}
	return total
}
