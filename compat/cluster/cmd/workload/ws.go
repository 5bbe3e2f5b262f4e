package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ---------------------------------------------------------------- server

const (
	wsEndNone        = iota
	wsEndServerClose // send close 1001 "going away", wait for the reply
	wsEndServerExit  // drop the connection without a close frame
)

type wsConn struct {
	c       *websocket.Conn
	peer    string
	closing chan struct{} // closed by shutdown; how is in how
	how     int
}

type wsServer struct {
	e     *env
	every time.Duration
	drain time.Duration
	up    websocket.Upgrader

	mu       sync.Mutex
	shutting bool
	conns    map[*wsConn]struct{}
	wg       sync.WaitGroup
}

func (s *wsServer) handle(w http.ResponseWriter, r *http.Request) {
	c, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade already answered with an HTTP error
	}
	wc := &wsConn{c: c, peer: r.RemoteAddr, closing: make(chan struct{})}
	s.mu.Lock()
	if s.shutting {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[wc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, wc)
		s.mu.Unlock()
		s.wg.Done()
	}()
	s.e.log.event("ws-accept", "peer", wc.peer)

	// The reader processes control frames and notices the peer going away.
	var readErr error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				readErr = err
				return
			}
		}
	}()

	t := time.NewTicker(s.every)
	defer t.Stop()
	sent := 0
	end := func(reason string, kv ...any) {
		c.Close()
		s.e.log.event("ws-end", append([]any{"peer", wc.peer, "sent", sent, "reason", reason}, kv...)...)
	}
	for {
		select {
		case <-t.C:
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			msg := fmt.Sprintf("tick %d %s", sent+1, s.e.host)
			if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				end("write-error", "error", err)
				return
			}
			sent++
		case <-readerDone:
			var ce *websocket.CloseError
			if errors.As(readErr, &ce) && ce.Code != websocket.CloseAbnormalClosure {
				end("client-closed", "close-code", ce.Code, "error", readErr)
			} else {
				end("read-error", "error", readErr)
			}
			return
		case <-wc.closing:
			if wc.how == wsEndServerExit {
				end("server-exit")
				return
			}
			msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "going away")
			err := c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			if err != nil {
				end("write-error", "close-code", websocket.CloseGoingAway, "error", err)
				return
			}
			// Wait for the peer's close reply (or the drain timeout).
			tm := time.NewTimer(s.drain)
			select {
			case <-readerDone:
			case <-tm.C:
			}
			tm.Stop()
			end("server-close", "close-code", websocket.CloseGoingAway)
			return
		}
	}
}

// shutdown ends every connection the given way and waits (bounded) for
// their ws-end events.
func (s *wsServer) shutdown(how int) {
	s.mu.Lock()
	s.shutting = true
	for wc := range s.conns {
		wc.how = how
		close(wc.closing)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(s.drain + 2*time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func runWSServer(e *env, args []string) int {
	fs := flag.NewFlagSet("ws-server", flag.ContinueOnError)
	listenAddr := fs.String("listen", ":8081", "HTTP listen address for /ws, / and /ready")
	every := fs.Duration("every", 100*time.Millisecond, "period of the text messages")
	delay := fs.Duration("shutdown-delay", 0, "after SIGTERM, keep sending this long before shutting down")
	drain := fs.Duration("drain", 5*time.Second, "with -close-on-term: how long to wait for the clients' close replies")
	closeOnTerm := fs.Bool("close-on-term", false, "at shutdown send close 1001 \"going away\" to every connection; otherwise drop them")
	unready := fs.Bool("unready-on-term", false, "/ready answers 503 once SIGTERM was received")
	code := fs.Int("exit-code", 0, "exit status")
	if !parseFlags(e, fs, args) {
		return 2
	}
	if *every <= 0 {
		return usageError(e, "ws-server", "-every must be > 0")
	}
	if *listenAddr == "" {
		return usageError(e, "ws-server", "-listen must not be empty")
	}
	app := &httpApp{e: e, unreadyOnTerm: *unready}
	ws := &wsServer{
		e: e, every: *every, drain: *drain,
		up:    websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		conns: map[*wsConn]struct{}{},
	}
	mux := http.NewServeMux()
	mux.Handle("/", app.handler())
	mux.HandleFunc("/ws", ws.handle)
	ln, ok := listen(e, *listenAddr, "ws")
	if !ok {
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	app.markReady(time.Now(), 0)
	termed := watchTerm(e, false)

	select {
	case <-termed:
	case <-e.ctx.Done():
		srv.Close()
		ws.shutdown(wsEndServerExit)
		return exitKilled
	}
	app.terminate()
	if !sleepCtx(e.ctx, *delay) {
		srv.Close()
		ws.shutdown(wsEndServerExit)
		return exitKilled
	}
	e.log.event("shutdown-start")
	srv.Close() // stops accepting; hijacked WebSocket connections are ours
	if *closeOnTerm {
		ws.shutdown(wsEndServerClose)
	} else {
		ws.shutdown(wsEndServerExit)
	}
	e.log.event("exit", "code", *code)
	return *code
}

// ---------------------------------------------------------------- client

func runWSClient(e *env, args []string) int {
	fs := flag.NewFlagSet("ws-client", flag.ContinueOnError)
	target := fs.String("url", "", "WebSocket URL, e.g. ws://10.96.0.12:8081/ws (required)")
	var o clientOpts
	o.register(fs)
	if !parseFlags(e, fs, args) {
		return 2
	}
	u, err := url.Parse(*target)
	if *target == "" || err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return usageError(e, "ws-client", fmt.Sprintf("-url: want ws://IP:PORT/ws, got %q", *target))
	}
	return runClientLoop(e, &o, func(ctx context.Context, n int) {
		wsAttempt(e, ctx, n, *target, o.timeout)
	})
}

// wsAttempt opens one WebSocket connection and logs how it ends.
func wsAttempt(e *env, ctx context.Context, n int, target string, timeout time.Duration) {
	d := websocket.Dialer{Proxy: nil, HandshakeTimeout: timeout}
	dctx, dcancel := context.WithTimeout(ctx, timeout)
	c, resp, err := d.DialContext(dctx, target, nil)
	dcancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			e.log.event("ws-cancelled", "n", n, "received", 0)
		case resp != nil:
			e.log.event("ws-open-failed", "n", n, "error", err, "status", resp.StatusCode)
		default:
			e.log.event("ws-open-failed", "n", n, "error", err)
		}
		return
	}
	defer c.Close()
	e.log.event("ws-open", "n", n, "status", resp.StatusCode)

	// On SIGTERM: say goodbye (1000), give the server a moment to answer.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "client exit")
			c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			c.SetReadDeadline(time.Now().Add(time.Second))
		case <-stop:
		}
	}()
	received := 0
	for {
		_, _, err = c.ReadMessage()
		if err != nil {
			break
		}
		received++
	}
	if ctx.Err() != nil {
		e.log.event("ws-cancelled", "n", n, "received", received)
		return
	}
	closeCode := websocket.CloseAbnormalClosure
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		closeCode = ce.Code
	}
	e.log.event("ws-broken", "n", n, "received", received, "close-code", closeCode, "error", err)
}
