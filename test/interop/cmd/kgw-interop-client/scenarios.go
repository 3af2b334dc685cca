package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client"
	clientmetrics "sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client/metrics"
)

type env struct {
	cfg *config
	d   dialer
}

// A scenario fills r with what it observed and returns an error when the observation is not what
// kube-apiserver would accept.
type scenarioFunc func(ctx context.Context, e *env, r result) error

var scenarioTable = map[string]scenarioFunc{
	"http":          httpRequests,
	"download":      download,
	"upload":        upload,
	"closed-port":   closedPort,
	"dial-cancel":   dialCancel,
	"close-client":  closeFromClient,
	"close-backend": closeFromBackend,
	"no-agent":      noAgent,
	// HTTP CONNECT only: raw requests whose status code the harness compares with upstream's.
	"status-closed-port": rawStatus(func(e *env) string { return connectTo(e.cfg.closedAddr) }),
	"status-slow-dial":   rawStatus(func(e *env) string { return connectTo(e.cfg.hangAddr) }),
	"status-no-agent":    rawStatus(func(e *env) string { return connectTo(e.cfg.httpBackend) }),
	"status-not-connect": rawStatus(func(*env) string { return "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }),
	"status-no-port":     rawStatus(func(*env) string { return connectTo("127.0.0.1") }),
}

func scenarioNames() []string {
	names := make([]string, 0, len(scenarioTable))
	for n := range scenarioTable {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func connectTo(addr string) string {
	return fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", addr)
}

func need(what, v string) error {
	if v == "" {
		return fmt.Errorf("this scenario needs %s", what)
	}
	return nil
}

// httpClient sends every request over a new tunnel, as kube-apiserver does for each new
// connection (keep-alives off so that each request really dials).
func (e *env) httpClient(ctx context.Context) *http.Client {
	deadline, _ := ctx.Deadline()
	return &http.Client{
		Timeout: time.Until(deadline),
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return e.d.Dial(ctx, addr)
			},
		},
	}
}

// httpRequests: 4 sequential, then 8 concurrent GET /hello, each through its own tunnel.
func httpRequests(ctx context.Context, e *env, r result) error {
	if err := need("-http-backend", e.cfg.httpBackend); err != nil {
		return err
	}
	c := e.httpClient(ctx)
	get := func() error {
		res, err := c.Get("http://" + e.cfg.httpBackend + "/hello")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		if res.StatusCode != 200 || string(body) != "hello from the backend" {
			return fmt.Errorf("GET /hello: %d %q", res.StatusCode, body)
		}
		return nil
	}
	for range 4 {
		if err := get(); err != nil {
			return err
		}
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- get() }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return err
		}
	}
	r["requests"] = 12
	return nil
}

// download: GET /bytes?n=N; the harness compares sha256 with the pattern the backend sends.
func download(ctx context.Context, e *env, r result) error {
	if err := need("-http-backend", e.cfg.httpBackend); err != nil {
		return err
	}
	start := time.Now()
	res, err := e.httpClient(ctx).Get(fmt.Sprintf("http://%s/bytes?n=%d", e.cfg.httpBackend, e.cfg.downloadN))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, res.Body)
	r["bytes"] = n
	r["sha256"] = hex.EncodeToString(h.Sum(nil))
	r["mib_per_s"] = float64(n) / (1 << 20) / time.Since(start).Seconds()
	if err != nil {
		return err
	}
	if n != e.cfg.downloadN {
		return fmt.Errorf("downloaded %d bytes, want %d", n, e.cfg.downloadN)
	}
	return nil
}

// upload: POST /sha256 with N pseudo-random bytes; the backend's digest must match ours.
func upload(ctx context.Context, e *env, r result) error {
	if err := need("-http-backend", e.cfg.httpBackend); err != nil {
		return err
	}
	h := sha256.New()
	body := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{7}), e.cfg.uploadN), h)
	res, err := e.httpClient(ctx).Post("http://"+e.cfg.httpBackend+"/sha256", "application/octet-stream", body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var got struct {
		Sha256 string `json:"sha256"`
		Bytes  int64  `json:"bytes"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		return fmt.Errorf("backend answer: %w", err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	r["bytes"] = got.Bytes
	r["sha256"] = got.Sha256
	if got.Sha256 != want || got.Bytes != e.cfg.uploadN {
		return fmt.Errorf("backend received %d bytes with sha256 %s, sent %d with %s", got.Bytes, got.Sha256, e.cfg.uploadN, want)
	}
	return nil
}

// describeDialError records how a failed dial surfaced: the konnectivity-client reason for gRPC,
// the status code for HTTP CONNECT.
func describeDialError(err error, r result) {
	r["dial_error"] = err.Error()
	var se *statusError
	if errors.As(err, &se) {
		r["status"] = se.code
		r["body"] = se.body
		return
	}
	if isDF, reason := client.GetDialFailureReason(err); isDF {
		r["reason"] = string(reason)
	}
}

// closedPort: the agent's dial is refused. gRPC: a DIAL_RSP error, which konnectivity-client
// reports as an "endpoint" failure carrying the agent's message. CONNECT: an error status.
func closedPort(ctx context.Context, e *env, r result) error {
	if err := need("-closed-addr", e.cfg.closedAddr); err != nil {
		return err
	}
	c, err := e.d.Dial(ctx, e.cfg.closedAddr)
	if err == nil {
		c.Close()
		return errors.New("dial to a closed port succeeded")
	}
	describeDialError(err, r)
	if e.cfg.transport == "connect" {
		if _, ok := r["status"]; !ok {
			return fmt.Errorf("want an HTTP error status, got %v", err)
		}
		return nil
	}
	// The message is the agent's own wording (the harness checks it where it matters).
	if r["reason"] != string(clientmetrics.DialFailureEndpoint) || err.Error() == "" {
		return fmt.Errorf("want an endpoint failure with the agent's message, got %q (reason %v)", err, r["reason"])
	}
	return nil
}

// noAgent: a dial while the server has no agent must fail promptly, not hang.
func noAgent(ctx context.Context, e *env, r result) error {
	if err := need("-http-backend", e.cfg.httpBackend); err != nil {
		return err
	}
	c, err := e.d.Dial(ctx, e.cfg.httpBackend)
	if err == nil {
		c.Close()
		return errors.New("dial succeeded without an agent")
	}
	describeDialError(err, r)
	if errors.Is(err, context.DeadlineExceeded) || r["reason"] == string(clientmetrics.DialFailureContext) {
		return fmt.Errorf("dial hung until the scenario timeout: %v", err)
	}
	return nil
}

// dialCancel: the caller gives up while the agent is still dialing. konnectivity-client sends
// DIAL_CLS and closes the tunnel; a CONNECT client just hangs up. The harness checks that the
// server passed the cancellation on to the agent.
func dialCancel(ctx context.Context, e *env, r result) error {
	if err := need("-hang-addr", e.cfg.hangAddr); err != nil {
		return err
	}
	const patience = 300 * time.Millisecond
	start := time.Now()
	if e.cfg.transport == "connect" {
		cd := e.d.(*connectDialer)
		conn, err := cd.open(ctx)
		if err != nil {
			return err
		}
		fmt.Fprint(conn, connectTo(e.cfg.hangAddr))
		_ = conn.SetReadDeadline(time.Now().Add(patience))
		buf := make([]byte, 1)
		n, err := conn.Read(buf)
		conn.Close()
		var ne net.Error
		if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
			return fmt.Errorf("want no answer while the agent dials, got %d bytes, err %v", n, err)
		}
		r["cancelled_after_ms"] = time.Since(start).Milliseconds()
	} else {
		dctx, cancel := context.WithTimeout(ctx, patience)
		defer cancel()
		c, err := e.d.Dial(dctx, e.cfg.hangAddr)
		if err == nil {
			c.Close()
			return errors.New("dial to a hanging listener succeeded")
		}
		describeDialError(err, r)
		r["cancelled_after_ms"] = time.Since(start).Milliseconds()
		if r["reason"] != string(clientmetrics.DialFailureContext) {
			return fmt.Errorf("want a context failure, got %q (reason %v)", err, r["reason"])
		}
	}
	// konnectivity-client sends DIAL_CLS from a goroutine; give it time before the next step.
	time.Sleep(300 * time.Millisecond)
	return nil
}

// probe is a loopback backend owned by this program, so it can see its side of a close.
type probe struct {
	ln     net.Listener
	closed chan struct{} // closed when the backend side saw the connection end
	once   sync.Once
}

// startProbe listens on 127.0.0.1. greet=false: echo until EOF. greet=true: wait for the
// client's first bytes, answer "bye\n", then close. (The client speaks first, as in TLS: with a
// backend that speaks first, konnectivity-client can drop the first DATA, which races its own
// registration of the new connection; see docs/COMPATIBILITY.md.)
func startProbe(greet bool) (*probe, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &probe{ln: ln, closed: make(chan struct{})}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer p.once.Do(func() { close(p.closed) })
		defer c.Close()
		if greet {
			buf := make([]byte, 3)
			if _, err := io.ReadFull(c, buf); err == nil {
				_, _ = c.Write([]byte("bye\n"))
			}
			return
		}
		_, _ = io.Copy(c, c)
	}()
	return p, nil
}

func (p *probe) addr() string { return p.ln.Addr().String() }

func waitFor(ch <-chan struct{}, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start), true
	case <-time.After(limit):
		return limit, false
	}
}

// readAllWithin reads until EOF; tunneled connections have no deadlines, so time it from outside.
func readAllWithin(c net.Conn, limit time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(c)
		ch <- res{b, err}
	}()
	select {
	case x := <-ch:
		return x.b, x.err
	case <-time.After(limit):
		c.Close()
		return nil, fmt.Errorf("no EOF within %v", limit)
	}
}

// closeFromClient: echo one message, then the client closes. The backend must see its
// connection end (CLOSE_REQ reached the agent), and a single-use tunnel must finish promptly
// (the CLOSE_RSP came back; otherwise the client waits out its 10 s close timeout).
func closeFromClient(ctx context.Context, e *env, r result) error {
	p, err := startProbe(false)
	if err != nil {
		return err
	}
	defer p.ln.Close()
	c, err := e.d.Dial(ctx, p.addr())
	if err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		return fmt.Errorf("echo: %q, %v", buf, err)
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	took, ok := waitFor(p.closed, 5*time.Second)
	r["backend_closed_ms"] = took.Milliseconds()
	if !ok {
		return errors.New("the backend connection stayed open after the client closed")
	}
	if tc, isTunnel := c.(*tunneledConn); isTunnel {
		took, ok := waitFor(tc.done, 5*time.Second)
		r["tunnel_done_ms"] = took.Milliseconds()
		if !ok {
			return errors.New("the tunnel did not finish after close: no CLOSE_RSP from the server")
		}
	}
	return nil
}

// closeFromBackend: the client says "hi\n", the backend answers "bye\n" and closes. The client
// must read exactly that, then EOF (the agent's CLOSE_RSP reached the client).
func closeFromBackend(ctx context.Context, e *env, r result) error {
	p, err := startProbe(true)
	if err != nil {
		return err
	}
	defer p.ln.Close()
	c, err := e.d.Dial(ctx, p.addr())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("hi\n")); err != nil {
		return err
	}
	start := time.Now()
	got, err := readAllWithin(c, 5*time.Second)
	r["eof_ms"] = time.Since(start).Milliseconds()
	if err != nil {
		return err
	}
	if string(got) != "bye\n" {
		return fmt.Errorf("read %q, want \"bye\\n\"", got)
	}
	if tc, isTunnel := c.(*tunneledConn); isTunnel {
		took, ok := waitFor(tc.done, 5*time.Second)
		r["tunnel_done_ms"] = took.Milliseconds()
		if !ok {
			return errors.New("the tunnel did not finish after the backend closed")
		}
	}
	return nil
}

// rawStatus sends one raw request head on a fresh frontend connection and records the status
// line and body of the answer. The harness decides which status is right.
func rawStatus(request func(*env) string) scenarioFunc {
	return func(ctx context.Context, e *env, r result) error {
		cd, ok := e.d.(*connectDialer)
		if !ok {
			return errors.New("status scenarios need -transport=connect")
		}
		conn, err := cd.open(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		defer stop()
		if _, err := io.WriteString(conn, request(e)); err != nil {
			return err
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return fmt.Errorf("no HTTP answer: %w", err)
		}
		r["status"] = res.StatusCode
		if res.StatusCode == http.StatusOK {
			return nil // a tunnel: the body is the backend's, and never ends by itself
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		r["body"] = strings.TrimSpace(string(body))
		return nil
	}
}
