package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// ticksMethod is the one server-streaming method: the client sends one
// (ignored) message, the server then sends a message every -every.
const ticksMethod = "/meshlife.Stream/Ticks"

// serverHeader is the response-header key naming the server's host.
const serverHeader = "x-meshlife-server"

// rawCodec moves []byte messages unchanged: no protobuf code is needed.
// Messages are []byte (or *[]byte) on send and *[]byte on receive.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

var ticksStreamDesc = grpc.StreamDesc{StreamName: "Ticks", ServerStreams: true}

// tickServiceDesc is a hand-written service descriptor (no generated code).
var tickServiceDesc = grpc.ServiceDesc{
	ServiceName: "meshlife.Stream",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Ticks",
		Handler:       ticksHandler,
		ServerStreams: true,
	}},
	Metadata: "meshlife/stream.proto",
}

// ---------------------------------------------------------------- server

type tickServer struct {
	e        *env
	every    time.Duration
	endCh    chan struct{} // closed at shutdown-start with -end-on-term
	stopping atomic.Bool   // set just before Server.Stop
}

func ticksHandler(srv any, stream grpc.ServerStream) error {
	s := srv.(*tickServer)
	ctx := stream.Context()
	peerAddr := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		peerAddr = p.Addr.String()
	}
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		s.e.log.event("stream-end", "peer", peerAddr, "sent", 0, "reason", "recv-error", "error", err)
		return err
	}
	s.e.log.event("stream-start", "peer", peerAddr)
	if err := stream.SendHeader(metadata.Pairs(serverHeader, s.e.host)); err != nil {
		s.e.log.event("stream-end", "peer", peerAddr, "sent", 0, "reason", s.lostReason("send-error"), "error", err)
		return err
	}
	t := time.NewTicker(s.every)
	defer t.Stop()
	sent := 0
	for {
		select {
		case <-t.C:
			msg := []byte(fmt.Sprintf("tick %d %s", sent+1, s.e.host))
			if err := stream.SendMsg(msg); err != nil {
				s.e.log.event("stream-end", "peer", peerAddr, "sent", sent, "reason", s.lostReason("send-error"), "error", err)
				return err
			}
			sent++
		case <-s.endCh:
			s.e.log.event("stream-end", "peer", peerAddr, "sent", sent, "reason", "server-shutdown")
			return nil
		case <-ctx.Done():
			s.e.log.event("stream-end", "peer", peerAddr, "sent", sent, "reason", s.lostReason("client-gone"), "error", ctx.Err())
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (s *tickServer) lostReason(otherwise string) string {
	if s.stopping.Load() {
		return "server-stop"
	}
	return otherwise
}

func runGRPCServer(e *env, args []string) int {
	fs := flag.NewFlagSet("grpc-server", flag.ContinueOnError)
	listenAddr := fs.String("listen", ":9090", "gRPC listen address")
	every := fs.Duration("every", 100*time.Millisecond, "period of the stream's messages")
	delay := fs.Duration("shutdown-delay", 0, "after SIGTERM, keep streaming this long before shutting down")
	drain := fs.Duration("drain", 5*time.Second, "GracefulStop timeout; then Stop (0 = Stop at once)")
	endOnTerm := fs.Bool("end-on-term", false, "at shutdown-start, end every stream cleanly (status OK) instead of leaving it running")
	httpListen := fs.String("http-listen", "", "optional HTTP address for / and /ready (empty = none)")
	unready := fs.Bool("unready-on-term", false, "with -http-listen: /ready answers 503 once SIGTERM was received")
	code := fs.Int("exit-code", 0, "exit status")
	if !parseFlags(e, fs, args) {
		return 2
	}
	if *every <= 0 {
		return usageError(e, "grpc-server", "-every must be > 0")
	}
	app := &httpApp{e: e, unreadyOnTerm: *unready}
	hsrv, ok := startHTTP(app, *httpListen)
	if !ok {
		return 1
	}
	defer closeHTTP(hsrv)
	ln, ok := listen(e, *listenAddr, "grpc")
	if !ok {
		return 1
	}
	ts := &tickServer{e: e, every: *every, endCh: make(chan struct{})}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.WaitForHandlers(true))
	srv.RegisterService(&tickServiceDesc, ts)
	go srv.Serve(ln)
	if hsrv != nil {
		app.markReady(time.Now(), 0)
	}
	termed := watchTerm(e, false)

	select {
	case <-termed:
	case <-e.ctx.Done():
		ts.stopping.Store(true)
		srv.Stop()
		return exitKilled
	}
	app.terminate()
	if !sleepCtx(e.ctx, *delay) {
		ts.stopping.Store(true)
		srv.Stop()
		return exitKilled
	}
	e.log.event("shutdown-start")
	if *endOnTerm {
		close(ts.endCh)
	}
	if *drain > 0 {
		done := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(done)
		}()
		t := time.NewTimer(*drain)
		select {
		case <-done:
			t.Stop()
		case <-t.C:
			e.log.event("drain-timeout", "drain", *drain)
			ts.stopping.Store(true)
			srv.Stop()
			<-done
		case <-e.ctx.Done():
			ts.stopping.Store(true)
			srv.Stop()
			<-done
			return exitKilled
		}
	} else {
		ts.stopping.Store(true)
		srv.Stop()
	}
	e.log.event("exit", "code", *code)
	return *code
}

// ---------------------------------------------------------------- client

// clientOpts are the flags shared by grpc-client and ws-client.
type clientOpts struct {
	reconnect      bool
	reconnectDelay time.Duration
	timeout        time.Duration
	listen         string
	exitOnEnd      bool
	exitCode       int
}

func (o *clientOpts) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.reconnect, "reconnect", false, "reopen after the stream/connection ended, forever")
	fs.DurationVar(&o.reconnectDelay, "reconnect-delay", 200*time.Millisecond, "wait before reopening")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "timeout of one open attempt (connect + response headers)")
	fs.StringVar(&o.listen, "listen", ":8080", "HTTP address for / and /ready (empty = none)")
	fs.BoolVar(&o.exitOnEnd, "exit-on-end", false, "without -reconnect: exit (with -exit-code) when the stream ended instead of idling until SIGTERM")
	fs.IntVar(&o.exitCode, "exit-code", 0, "exit status")
}

// runClientLoop runs attempt(ctx, n) for n = 1, 2, ... as the client flags
// say, and handles SIGTERM (ctx is cancelled at SIGTERM).
func runClientLoop(e *env, o *clientOpts, attempt func(ctx context.Context, n int)) int {
	app := &httpApp{e: e}
	hsrv, ok := startHTTP(app, o.listen)
	if !ok {
		return 1
	}
	defer closeHTTP(hsrv)
	if hsrv != nil {
		app.markReady(time.Now(), 0)
	}
	termed := watchTerm(e, false)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go func() {
		select {
		case <-termed:
			cancel()
		case <-ctx.Done():
		}
	}()
	finish := func() int {
		if e.ctx.Err() != nil {
			return exitKilled
		}
		e.log.event("exit", "code", o.exitCode)
		return o.exitCode
	}
	for n := 1; ; n++ {
		attempt(ctx, n)
		if ctx.Err() != nil {
			return finish()
		}
		if !o.reconnect {
			if o.exitOnEnd {
				e.log.event("exit", "code", o.exitCode, "reason", "ended")
				return o.exitCode
			}
			<-ctx.Done()
			return finish()
		}
		if !sleepCtx(ctx, o.reconnectDelay) {
			return finish()
		}
	}
}

func runGRPCClient(e *env, args []string) int {
	fs := flag.NewFlagSet("grpc-client", flag.ContinueOnError)
	target := fs.String("target", "", "server address IP:PORT (required)")
	var o clientOpts
	o.register(fs)
	if !parseFlags(e, fs, args) {
		return 2
	}
	if *target == "" {
		return usageError(e, "grpc-client", "-target is required")
	}
	dialTarget := *target
	if !strings.Contains(dialTarget, "://") {
		dialTarget = "passthrough:///" + dialTarget // no resolver, no DNS
	}
	return runClientLoop(e, &o, func(ctx context.Context, n int) {
		grpcAttempt(e, ctx, n, dialTarget, o.timeout)
	})
}

// grpcAttempt opens one stream on a fresh connection and logs how it ends.
func grpcAttempt(e *env, ctx context.Context, n int, target string, timeout time.Duration) {
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		e.log.event("stream-open-failed", "n", n, "code", codes.Internal.String(), "error", err)
		return
	}
	defer cc.Close()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var timedOut atomic.Bool
	openTimer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		scancel()
	})
	openFailed := func(err error) {
		openTimer.Stop()
		switch {
		case ctx.Err() != nil:
			e.log.event("stream-cancelled", "n", n, "received", 0)
		case timedOut.Load():
			e.log.event("stream-open-failed", "n", n, "code", codes.DeadlineExceeded.String(),
				"error", fmt.Sprintf("no response headers within %s", timeout))
		case errors.Is(err, io.EOF):
			e.log.event("stream-closed", "n", n, "received", 0)
		default:
			st := status.Convert(err)
			e.log.event("stream-open-failed", "n", n, "code", st.Code().String(), "error", st.Message())
		}
	}
	cs, err := cc.NewStream(sctx, &ticksStreamDesc, ticksMethod)
	if err != nil {
		openFailed(err)
		return
	}
	// A send error means the stream already ended; RecvMsg has the status.
	if cs.SendMsg([]byte("ticks")) == nil {
		cs.CloseSend()
	}
	md, _ := cs.Header()
	if md == nil {
		var m []byte
		openFailed(cs.RecvMsg(&m))
		return
	}
	openTimer.Stop()
	server := ""
	if v := md.Get(serverHeader); len(v) > 0 {
		server = v[0]
	}
	e.log.event("stream-open", "n", n, "server", server)
	received := 0
	for {
		var m []byte
		err = cs.RecvMsg(&m)
		if err != nil {
			break
		}
		received++
	}
	switch {
	case err == io.EOF:
		e.log.event("stream-closed", "n", n, "received", received)
	case ctx.Err() != nil:
		e.log.event("stream-cancelled", "n", n, "received", received)
	default:
		st := status.Convert(err)
		e.log.event("stream-broken", "n", n, "received", received, "code", st.Code().String(), "error", st.Message())
	}
}
