// Command workload is the test workload of the meshlife "reality" stage: a
// single static binary (CGO_ENABLED=0) that runs as PID 1 in a FROM-scratch
// container next to an Istio sidecar and prints what it observes.
//
// Usage:
//
//	workload MODE [flags]
//
// Modes: serve, call, job, grpc-server, grpc-client, ws-server, ws-client,
// sleep. Run `workload MODE -h` for a mode's flags.
//
// HTTP endpoints (serve, call -then serve, and -listen/-http-listen of the
// other modes): / answers 200 "ok <hostname>"; /ready answers 200 when ready,
// else 503; /delay?d=DURATION answers 200 after DURATION. ws-server adds /ws.
//
// It needs no shell, no /etc files and no DNS: every address is IP:port or a
// URL with an IP. It installs its own SIGTERM/SIGINT handler (as PID 1 there
// is no default action).
//
// # Output format
//
// Every line goes to stdout and is one event:
//
//	<timestamp> <event> key=value key=value ...
//
// The timestamp is UTC in RFC 3339 with exactly nine fractional digits
// (2006-01-02T15:04:05.000000000Z), which time.Parse(time.RFC3339Nano, ...)
// accepts and which sorts lexically. A value is written bare unless it is
// empty or contains a space, '=', '"', '\' or a non-printable/non-ASCII
// character; then it is written with strconv.Quote. Keys never need quoting.
// Durations (took=, drain=) use Go syntax with "us" for microseconds
// (1.5ms, 602us), readable with time.ParseDuration.
// Only the help text of `-h` (and the mode list after a usage error) goes to
// stderr; the usage error itself is also an event on stdout.
//
// # Events
//
// Common to all modes:
//
//	started mode=M args=A pid=P host=H   first line of every run
//	usage-error error=E [mode=M]         bad mode or flags; exit status 2
//	loading for=D                        serve -listen-after: nothing listens for D
//	listening addr=A proto=http|grpc|ws  a listener is bound (A is the real address)
//	listen-failed addr=A error=E         could not bind; exit status 1
//	ready                                /ready starts answering 200 (only modes serving HTTP)
//	unready                              /ready answers 503 from now on (-unready-on-term)
//	request method=M path=P remote=R     an HTTP request arrived (-log-requests)
//	sigterm signal=S n=N                 SIGTERM (or SIGINT) received; n counts them
//	sigterm-ignored signal=S n=N         sleep -ignore-term: the signal was ignored
//	shutdown-start                       the -shutdown-delay is over, shutdown begins
//	drain-timeout drain=D                graceful drain did not finish within -drain; forcing
//	exit code=N [reason=R]               last line before the process exits with status N
//	exit-skipped marker=F                serve -exit-after -exit-once: F exists, no exit this run
//
// HTTP client (call, job, serve -call-on-term):
//
//	call-ok n=I status=S took=D [phase=term]
//	    call I (1-based) got an HTTP response with status < 400
//	call-failed n=I error=E took=D [status=S] [phase=term]
//	    call I got no response (E is the Go error), or a status >= 400 (then
//	    status=S and E holds "HTTP S: <start of body>", e.g. an Envoy 503)
//	calls total=N ok=K failed=F first-ok-n=I [aborted=true]
//	    summary of the calls; first-ok-n is 0 when no call succeeded;
//	    aborted=true when SIGTERM cut the calls short
//	quit status=S | quit-failed error=E
//	    result of the POST to -quit-url (e.g. http://127.0.0.1:15020/quitquitquit)
//
// gRPC (grpc-server, grpc-client); method /meshlife.Stream/Ticks:
//
//	stream-start peer=P                        server: a client opened the stream
//	stream-end peer=P sent=N reason=R [error=E]
//	    server: a stream ended; R is one of
//	    client-gone (client cancelled or connection lost), server-stop (the
//	    server was stopped hard: -drain 0 or drain timeout), server-shutdown
//	    (-end-on-term: ended cleanly with status OK), send-error
//	stream-open n=A server=H                   client: attempt A got the server's headers
//	stream-open-failed n=A code=C error=E      client: attempt A ended before any header
//	stream-broken n=A received=N code=C error=E
//	    client: the stream ended with a non-OK status (C is the gRPC code name)
//	stream-closed n=A received=N               client: the server ended the stream with OK (io.EOF)
//	stream-cancelled n=A received=N            client: we ended the stream ourselves (SIGTERM)
//
// WebSocket (ws-server, ws-client); endpoint /ws:
//
//	ws-accept peer=P                           server: a client connected
//	ws-end peer=P sent=N reason=R [close-code=C] [error=E]
//	    server: a connection ended; R is one of
//	    client-closed (client sent a close frame, code C), read-error
//	    (connection lost without a close frame), write-error, server-close
//	    (-close-on-term: we sent close 1001 "going away"), server-exit (we
//	    dropped the connection without a close frame)
//	ws-open n=A status=101                     client: attempt A upgraded
//	ws-open-failed n=A error=E [status=S]      client: attempt A could not connect/upgrade
//	ws-broken n=A received=N close-code=C error=E
//	    client: the connection ended; C is the peer's close code when a close
//	    frame arrived, 1006 (abnormal closure) otherwise
//	ws-cancelled n=A received=N                client: we closed it ourselves (SIGTERM)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// timeLayout is RFC 3339 with a fixed nine-digit fraction, always UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// exitKilled is what run returns when its context is cancelled (the
// in-process stand-in for SIGKILL used by tests); nothing is logged then.
const exitKilled = 137

func main() {
	// Called as sleep (the image's /bin/sleep), it is sleep(1): a preStop `exec: [sleep, "8"]`
	// runs as users write it, in an image with no shell and no coreutils.
	if filepath.Base(os.Args[0]) == "sleep" {
		os.Exit(sleepCommand(os.Args[1:], os.Stderr))
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// env is what a mode needs from the outside world; tests build their own.
type env struct {
	ctx  context.Context // cancelled = killed (tests only)
	log  *logger
	errw io.Writer // help text only
	sigs <-chan os.Signal
	host string
}

// run executes one invocation and returns the exit status.
func run(ctx context.Context, args []string, out, errw io.Writer, sigs <-chan os.Signal) int {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	e := &env{ctx: ctx, log: &logger{w: out}, errw: errw, sigs: sigs, host: host}
	mode := ""
	if len(args) > 0 {
		mode = args[0]
		args = args[1:]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = formatValue(a)
	}
	e.log.event("started", "mode", mode, "args", strings.Join(quoted, " "), "pid", os.Getpid(), "host", host)
	switch mode {
	case "serve":
		return runServe(e, args)
	case "call":
		return runCall(e, "call", args)
	case "job":
		return runCall(e, "job", args)
	case "grpc-server":
		return runGRPCServer(e, args)
	case "grpc-client":
		return runGRPCClient(e, args)
	case "ws-server":
		return runWSServer(e, args)
	case "ws-client":
		return runWSClient(e, args)
	case "sleep":
		return runSleep(e, args)
	case "", "-h", "-help", "--help", "help":
		e.log.event("usage-error", "error", "missing mode")
		fmt.Fprint(errw, modesUsage)
		return 2
	default:
		e.log.event("usage-error", "error", "unknown mode "+strconv.Quote(mode))
		fmt.Fprint(errw, modesUsage)
		return 2
	}
}

const modesUsage = `usage: workload MODE [flags]

modes:
  serve        HTTP server (/ and /ready) with configurable SIGTERM behaviour
  call         call -url -count times, then exit (-then exit) or serve (-then serve)
  job          like call -then exit
  grpc-server  server-streaming gRPC /meshlife.Stream/Ticks
  grpc-client  opens /meshlife.Stream/Ticks and counts messages
  ws-server    WebSocket /ws sending a message every -every
  ws-client    connects to a WebSocket URL and counts messages
  sleep        does nothing but handle SIGTERM

run "workload MODE -h" for the flags of a mode.
`

// parseFlags parses a mode's flags; on error it logs usage-error, prints
// the flag defaults to stderr and returns false (exit status 2).
func parseFlags(e *env, fs *flag.FlagSet, args []string) bool {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err == nil {
		return true
	}
	if errors.Is(err, flag.ErrHelp) {
		err = errors.New("help requested")
	}
	e.log.event("usage-error", "mode", fs.Name(), "error", err.Error())
	fmt.Fprintf(e.errw, "usage: workload %s [flags]\n", fs.Name())
	fs.SetOutput(e.errw)
	fs.PrintDefaults()
	return false
}

func usageError(e *env, mode, msg string) int {
	e.log.event("usage-error", "mode", mode, "error", msg)
	return 2
}

// ---------------------------------------------------------------- logging

type logger struct {
	mu sync.Mutex
	w  io.Writer
}

// event writes one line: timestamp, event word, then key/value pairs.
func (l *logger) event(name string, kv ...any) {
	var b strings.Builder
	b.WriteString(time.Now().UTC().Format(timeLayout))
	b.WriteByte(' ')
	b.WriteString(name)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(' ')
		fmt.Fprint(&b, kv[i])
		b.WriteByte('=')
		b.WriteString(formatValue(kv[i+1]))
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, b.String())
}

func formatValue(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case error:
		s = x.Error()
	case time.Duration:
		// Go duration syntax, ASCII only ("us", not "µs"): time.ParseDuration reads it back.
		s = strings.Replace(x.String(), "µs", "us", 1)
	case fmt.Stringer:
		s = x.String()
	default:
		s = fmt.Sprint(x)
	}
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r <= ' ' || r == '=' || r == '"' || r == '\\' || r >= 0x7f || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------- signals

// watchTerm logs every SIGTERM/SIGINT and returns a channel closed at the
// first one. With ignore, signals are logged as sigterm-ignored and the
// channel is never closed.
func watchTerm(e *env, ignore bool) <-chan struct{} {
	termed := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case s := <-e.sigs:
				n++
				if ignore {
					e.log.event("sigterm-ignored", "signal", s.String(), "n", n)
					continue
				}
				e.log.event("sigterm", "signal", s.String(), "n", n)
				if n == 1 {
					close(termed)
				}
			case <-e.ctx.Done():
				return
			}
		}
	}()
	return termed
}

// sleepCtx waits d or until ctx is done; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---------------------------------------------------------------- HTTP side

// httpApp holds the / and /ready handlers shared by all modes that serve
// HTTP.
type httpApp struct {
	e             *env
	ready         atomic.Bool
	terminating   atomic.Bool
	unreadyOnTerm bool
	logRequests   bool
}

func (a *httpApp) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.logRequest(r)
		fmt.Fprintf(w, "ok %s\n", a.e.host)
	})
	// /delay?d=DURATION answers like / after DURATION (an in-flight request
	// to observe draining); it answers 503 if the server closes first.
	mux.HandleFunc("/delay", func(w http.ResponseWriter, r *http.Request) {
		a.logRequest(r)
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 {
			http.Error(w, "want /delay?d=DURATION", http.StatusBadRequest)
			return
		}
		if !sleepCtx(r.Context(), d) {
			return // client or server gone
		}
		fmt.Fprintf(w, "ok %s after %s\n", a.e.host, d)
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		a.logRequest(r)
		if a.isReady() {
			io.WriteString(w, "ready\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready\n")
	})
	return mux
}

func (a *httpApp) logRequest(r *http.Request) {
	if a.logRequests {
		a.e.log.event("request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	}
}

func (a *httpApp) isReady() bool {
	return a.ready.Load() && !(a.unreadyOnTerm && a.terminating.Load())
}

// markReady makes /ready answer 200 (after readyAfter from start) and logs
// ready, unless terminating with -unready-on-term.
func (a *httpApp) markReady(start time.Time, readyAfter time.Duration) {
	go func() {
		if !sleepCtx(a.e.ctx, time.Until(start.Add(readyAfter))) {
			return
		}
		if a.unreadyOnTerm && a.terminating.Load() {
			return
		}
		a.ready.Store(true)
		a.e.log.event("ready")
	}()
}

func (a *httpApp) terminate() {
	a.terminating.Store(true)
	if a.unreadyOnTerm && a.ready.Load() {
		a.e.log.event("unready")
	}
}

// listen binds addr and logs listening (or listen-failed).
func listen(e *env, addr, proto string) (net.Listener, bool) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		e.log.event("listen-failed", "addr", addr, "error", err)
		return nil, false
	}
	e.log.event("listening", "addr", ln.Addr().String(), "proto", proto)
	return ln, true
}

// startHTTP serves a's handlers on addr; "" means no HTTP server (nil, true).
func startHTTP(a *httpApp, addr string) (*http.Server, bool) {
	if addr == "" {
		return nil, true
	}
	ln, ok := listen(a.e, addr, "http")
	if !ok {
		return nil, false
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, true
}

func closeHTTP(srv *http.Server) {
	if srv != nil {
		srv.Close()
	}
}

// ---------------------------------------------------------------- sleep

func runSleep(e *env, args []string) int {
	fs := flag.NewFlagSet("sleep", flag.ContinueOnError)
	ignore := fs.Bool("ignore-term", false, "ignore SIGTERM entirely (log sigterm-ignored); only SIGKILL ends it")
	delay := fs.Duration("shutdown-delay", 0, "after SIGTERM, wait this long before exiting")
	exitAfter := fs.Duration("exit-after", 0, "exit by itself after this long (0 = never)")
	listenAddr := fs.String("listen", "", "optional HTTP address for / and /ready (empty = none)")
	code := fs.Int("exit-code", 0, "exit status")
	if !parseFlags(e, fs, args) {
		return 2
	}
	app := &httpApp{e: e}
	srv, ok := startHTTP(app, *listenAddr)
	if !ok {
		return 1
	}
	defer closeHTTP(srv)
	if srv != nil {
		app.markReady(time.Now(), 0)
	}
	termed := watchTerm(e, *ignore)
	var timer <-chan time.Time
	if *exitAfter > 0 {
		t := time.NewTimer(*exitAfter)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-termed:
		app.terminate()
		if !sleepCtx(e.ctx, *delay) {
			return exitKilled
		}
		e.log.event("exit", "code", *code)
	case <-timer:
		e.log.event("exit", "code", *code, "reason", "exit-after")
	case <-e.ctx.Done():
		return exitKilled
	}
	return *code
}

// sleepCommand is sleep(1) for one operand: seconds (8, 0.5) or with a unit suffix s, m or h.
func sleepCommand(args []string, errw io.Writer) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(errw, "usage: sleep SECONDS[s|m|h]")
		return 1
	}
	operand := args[0]
	if last := operand[len(operand)-1]; last >= '0' && last <= '9' {
		operand += "s"
	}
	d, err := time.ParseDuration(operand)
	if err != nil || d < 0 {
		fmt.Fprintf(errw, "sleep: invalid time interval %q\n", args[0])
		return 1
	}
	time.Sleep(d)
	return 0
}
