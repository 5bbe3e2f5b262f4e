package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// serveOpts are the flags of the HTTP server side (serve, call -then serve).
type serveOpts struct {
	listen          string
	listenAfter     time.Duration
	readyAfter      time.Duration
	unreadyOnTerm   bool
	shutdownDelay   time.Duration
	drain           time.Duration
	logRequests     bool
	callOnTerm      string
	callOnTermEvery time.Duration
	timeout         time.Duration
	keepalive       bool
	exitCode        int
	exitAfter       time.Duration
	exitAfterCode   int
	exitOnce        string
}

func (o *serveOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", ":8080", "HTTP listen address for / and /ready")
	fs.DurationVar(&o.listenAfter, "listen-after", 0, "an app still loading: bind -listen only this long after start (serve mode)")
	fs.DurationVar(&o.readyAfter, "ready-after", 0, "/ready answers 503 until this long after start")
	fs.BoolVar(&o.unreadyOnTerm, "unready-on-term", false, "/ready answers 503 once SIGTERM was received")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "after SIGTERM, keep serving this long before shutting down")
	fs.DurationVar(&o.drain, "drain", 5*time.Second, "timeout of http.Server.Shutdown; then remaining connections are closed")
	fs.BoolVar(&o.logRequests, "log-requests", false, "log a request event per HTTP request")
	fs.StringVar(&o.callOnTerm, "call-on-term", "", "after SIGTERM, GET this URL repeatedly until exit (events carry phase=term)")
	fs.DurationVar(&o.callOnTermEvery, "call-on-term-every", 100*time.Millisecond, "period of -call-on-term calls")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "timeout of each outbound HTTP call")
	fs.BoolVar(&o.keepalive, "keepalive", false, "reuse connections between outbound calls (default: a new connection per call)")
	fs.IntVar(&o.exitCode, "exit-code", 0, "exit status")
	fs.DurationVar(&o.exitAfter, "exit-after", 0, "serve mode: exit on its own this long after start, with -exit-after-code (0: never)")
	fs.IntVar(&o.exitAfterCode, "exit-after-code", 1, "exit status of -exit-after")
	fs.StringVar(&o.exitOnce, "exit-once", "", "with -exit-after: exit only when this file does not exist yet, and create it first (a marker on a volume that outlives the container)")
}

func checkHTTPURL(name, s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("-%s: %v", name, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-%s: want http://IP:PORT/..., got %q", name, s)
	}
	return nil
}

// ---------------------------------------------------------------- caller

type caller struct {
	e       *env
	client  *http.Client
	timeout time.Duration
}

func newCaller(e *env, timeout time.Duration, keepalive bool) *caller {
	tr := &http.Transport{
		Proxy:             nil, // never read proxy variables
		DisableKeepAlives: !keepalive,
		ForceAttemptHTTP2: false,
	}
	return &caller{e: e, client: &http.Client{Transport: tr}, timeout: timeout}
}

// get performs call n and logs call-ok or call-failed; extra key/values are
// appended to the event.
func (c *caller) get(n int, target string, extra ...any) bool {
	ctx, cancel := context.WithTimeout(c.e.ctx, c.timeout)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		c.e.log.event("call-failed", append([]any{"n", n, "error", err, "took", time.Duration(0)}, extra...)...)
		return false
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.e.log.event("call-failed", append([]any{"n", n, "error", err, "took", time.Since(start).Round(time.Microsecond)}, extra...)...)
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	took := time.Since(start).Round(time.Microsecond)
	if resp.StatusCode >= 400 {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200]
		}
		c.e.log.event("call-failed", append([]any{"n", n, "status", resp.StatusCode,
			"error", fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet), "took", took}, extra...)...)
		return false
	}
	c.e.log.event("call-ok", append([]any{"n", n, "status", resp.StatusCode, "took", took}, extra...)...)
	return true
}

// quit POSTs to the quit URL (Istio's /quitquitquit) and logs the result.
func (c *caller) quit(target string) {
	ctx, cancel := context.WithTimeout(c.e.ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err == nil {
		var resp *http.Response
		resp, err = c.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			c.e.log.event("quit", "status", resp.StatusCode)
			return
		}
	}
	c.e.log.event("quit-failed", "error", err)
}

// ---------------------------------------------------------------- serve

func runServe(e *env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var o serveOpts
	o.register(fs)
	if !parseFlags(e, fs, args) {
		return 2
	}
	if o.listen == "" {
		return usageError(e, "serve", "-listen must not be empty")
	}
	if o.callOnTerm != "" {
		if err := checkHTTPURL("call-on-term", o.callOnTerm); err != nil {
			return usageError(e, "serve", err.Error())
		}
	}
	start := time.Now()
	termed := watchTerm(e, false)
	if o.listenAfter > 0 {
		// Nothing listens while the app loads: a connection to its port is refused, as by an
		// app that reads its data or warms a cache before it binds.
		e.log.event("loading", "for", o.listenAfter)
		timer := time.NewTimer(o.listenAfter)
		select {
		case <-timer.C:
		case <-termed:
			timer.Stop()
			e.log.event("exit", "code", o.exitCode, "reason", "sigterm-while-loading")
			return o.exitCode
		case <-e.ctx.Done():
			timer.Stop()
			return exitKilled
		}
	}
	app := &httpApp{e: e, unreadyOnTerm: o.unreadyOnTerm, logRequests: o.logRequests}
	srv, ok := startHTTP(app, o.listen)
	if !ok {
		return 1
	}
	app.markReady(start, o.readyAfter)
	if exited, code := exitAfter(e, &o, start, termed); exited {
		srv.Close()
		return code
	}
	return serveUntilTerm(e, app, srv, termed, &o)
}

// exitAfter waits out -exit-after and says whether the app exits on its own now (unless the
// -exit-once marker says it did so before); it returns at once when it does not apply, and
// when SIGTERM comes first (termed stays closed for serveUntilTerm).
func exitAfter(e *env, o *serveOpts, start time.Time, termed <-chan struct{}) (bool, int) {
	if o.exitAfter <= 0 {
		return false, 0
	}
	if o.exitOnce != "" {
		if _, err := os.Stat(o.exitOnce); err == nil {
			e.log.event("exit-skipped", "marker", o.exitOnce)
			return false, 0
		}
	}
	timer := time.NewTimer(time.Until(start.Add(o.exitAfter)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-termed:
		return false, 0
	case <-e.ctx.Done():
		return true, exitKilled
	}
	if o.exitOnce != "" {
		if err := os.WriteFile(o.exitOnce, []byte(time.Now().UTC().Format(timeLayout)+"\n"), 0o644); err != nil {
			e.log.event("marker-failed", "marker", o.exitOnce, "error", err)
		}
	}
	e.log.event("exit", "code", o.exitAfterCode, "reason", "exit-after")
	return true, o.exitAfterCode
}

// serveUntilTerm keeps srv running until SIGTERM, then runs the shutdown
// sequence: shutdown-delay (still serving, optional -call-on-term calls),
// shutdown-start, Shutdown with the -drain timeout, exit.
func serveUntilTerm(e *env, app *httpApp, srv *http.Server, termed <-chan struct{}, o *serveOpts) int {
	select {
	case <-termed:
	case <-e.ctx.Done():
		srv.Close()
		return exitKilled
	}
	app.terminate()

	var wg sync.WaitGroup
	stopCalls := make(chan struct{})
	if o.callOnTerm != "" {
		c := newCaller(e, o.timeout, o.keepalive)
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for n := 1; ; n++ {
				c.get(n, o.callOnTerm, "phase", "term")
				next = next.Add(o.callOnTermEvery)
				t := time.NewTimer(time.Until(next))
				select {
				case <-t.C:
				case <-stopCalls:
					t.Stop()
					return
				}
			}
		}()
	}

	if !sleepCtx(e.ctx, o.shutdownDelay) {
		srv.Close()
		return exitKilled
	}
	e.log.event("shutdown-start")
	ctx, cancel := context.WithTimeout(e.ctx, o.drain)
	err := srv.Shutdown(ctx)
	cancel()
	if err != nil {
		if e.ctx.Err() != nil {
			srv.Close()
			return exitKilled
		}
		if errors.Is(err, context.DeadlineExceeded) {
			e.log.event("drain-timeout", "drain", o.drain)
		}
		srv.Close()
	}
	close(stopCalls)
	wg.Wait()
	e.log.event("exit", "code", o.exitCode)
	return o.exitCode
}

// ---------------------------------------------------------------- call / job

func runCall(e *env, mode string, args []string) int {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	target := fs.String("url", "", "URL to GET (required), e.g. http://10.96.0.12:8080/")
	count := fs.Int("count", 10, "number of calls (0 = until SIGTERM or -until-ok)")
	interval := fs.Duration("interval", time.Second, "period between the starts of two calls")
	untilOK := fs.Bool("until-ok", false, "stop calling after the first successful call")
	quitURL := fs.String("quit-url", "", "after the calls, POST to this URL (e.g. http://127.0.0.1:15020/quitquitquit)")
	failCode := fs.Int("fail-exit-code", -1, "with -then exit: exit with this status if no call succeeded (-1 = use -exit-code)")
	var then string
	if mode == "job" {
		fs.StringVar(&then, "then", "exit", "job always exits after the calls (only exit is accepted)")
	} else {
		fs.StringVar(&then, "then", "exit", "after the calls: exit, or serve HTTP on -listen until SIGTERM")
	}
	var o serveOpts
	o.register(fs)
	if !parseFlags(e, fs, args) {
		return 2
	}
	if *target == "" {
		return usageError(e, mode, "-url is required")
	}
	if err := checkHTTPURL("url", *target); err != nil {
		return usageError(e, mode, err.Error())
	}
	if *quitURL != "" {
		if err := checkHTTPURL("quit-url", *quitURL); err != nil {
			return usageError(e, mode, err.Error())
		}
	}
	if o.callOnTerm != "" {
		if err := checkHTTPURL("call-on-term", o.callOnTerm); err != nil {
			return usageError(e, mode, err.Error())
		}
	}
	if mode == "job" && then != "exit" {
		return usageError(e, mode, fmt.Sprintf("job always exits after the calls; -then %q is not allowed (use call)", then))
	}
	if then != "exit" && then != "serve" {
		return usageError(e, mode, fmt.Sprintf("-then must be exit or serve, got %q", then))
	}
	if *count < 0 {
		return usageError(e, mode, "-count must be >= 0")
	}
	if then == "serve" && o.listen == "" {
		return usageError(e, mode, "-then serve needs -listen")
	}
	if o.listenAfter != 0 {
		return usageError(e, mode, "-listen-after is a serve flag: -then serve listens from the start")
	}

	start := time.Now()
	termed := watchTerm(e, false)
	var app *httpApp
	var srv *http.Server
	if then == "serve" {
		// Listen from the start; /ready stays 503 until the calls are done.
		app = &httpApp{e: e, unreadyOnTerm: o.unreadyOnTerm, logRequests: o.logRequests}
		var ok bool
		if srv, ok = startHTTP(app, o.listen); !ok {
			return 1
		}
	}

	c := newCaller(e, o.timeout, o.keepalive)
	total, okCount, firstOK := 0, 0, 0
	aborted := false
loop:
	for n := 1; *count == 0 || n <= *count; n++ {
		if n > 1 {
			t := time.NewTimer(time.Until(start.Add(time.Duration(n-1) * *interval)))
			select {
			case <-t.C:
			case <-termed:
				t.Stop()
				aborted = true
				break loop
			case <-e.ctx.Done():
				t.Stop()
				closeHTTP(srv)
				return exitKilled
			}
		}
		select {
		case <-termed:
			aborted = true
			break loop
		default:
		}
		total++
		if c.get(n, *target) {
			okCount++
			if firstOK == 0 {
				firstOK = n
			}
			if *untilOK {
				break loop
			}
		}
		if e.ctx.Err() != nil {
			closeHTTP(srv)
			return exitKilled
		}
	}
	summary := []any{"total", total, "ok", okCount, "failed", total - okCount, "first-ok-n", firstOK}
	if aborted {
		summary = append(summary, "aborted", "true")
	}
	e.log.event("calls", summary...)
	if *quitURL != "" && !aborted {
		c.quit(*quitURL)
	}
	if then == "serve" {
		app.markReady(start, o.readyAfter)
		return serveUntilTerm(e, app, srv, termed, &o)
	}
	code := o.exitCode
	if okCount == 0 && *failCode >= 0 {
		code = *failCode
	}
	e.log.event("exit", "code", code)
	return code
}
