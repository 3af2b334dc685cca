package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client"
)

// dialer opens one tunneled connection to addr, as kube-apiserver's egress dialer does.
type dialer interface {
	Dial(ctx context.Context, addr string) (net.Conn, error)
	Close()
}

// tunneledConn is a connection from a single-use gRPC tunnel; done closes when the tunnel has
// finished (after the server's CLOSE_RSP, or the client's 10 s close timeout).
type tunneledConn struct {
	net.Conn
	done <-chan struct{}
}

func newDialer(cfg *config) (dialer, error) {
	switch cfg.transport {
	case "grpc":
		opts, target, err := grpcOptions(cfg)
		if err != nil {
			return nil, err
		}
		return &singleUseDialer{target: target, opts: opts}, nil
	case "grpc-reusable":
		opts, target, err := grpcOptions(cfg)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		defer cancel()
		t, err := client.CreateGRPCTunnel(ctx, target, opts...)
		if err != nil {
			return nil, fmt.Errorf("CreateGRPCTunnel: %w", err)
		}
		return &reusableDialer{tunnel: t}, nil
	default:
		var tlsConfig *tls.Config
		if cfg.addr != "" {
			c, err := clientTLS(cfg)
			if err != nil {
				return nil, err
			}
			tlsConfig = c
		}
		return &connectDialer{cfg: cfg, tlsConfig: tlsConfig}, nil
	}
}

// grpcOptions mirrors kube-apiserver's egress selector: over a Unix socket, plaintext with a
// custom dialer (WithBlock, WithReturnConnectionError); over TCP, the same with mTLS.
func grpcOptions(cfg *config) ([]grpc.DialOption, string, error) {
	// Both deprecated in grpc-go, and both still passed by kube-apiserver.
	opts := []grpc.DialOption{grpc.WithBlock(), grpc.WithReturnConnectionError()}
	if cfg.uds != "" {
		uds := cfg.uds
		opts = append(opts,
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", uds)
			}),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
		)
		return opts, uds, nil
	}
	tlsConfig, err := clientTLS(cfg)
	if err != nil {
		return nil, "", err
	}
	return append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig))), cfg.addr, nil
}

// clientTLS is kube-apiserver's getTLSConfig: client certificate, CA bundle, optional server
// name, and no ALPN of its own.
func clientTLS(cfg *config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.cert, cfg.key)
	if err != nil {
		return nil, fmt.Errorf("client key pair: %w", err)
	}
	pem, err := os.ReadFile(cfg.caCert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificates in %s", cfg.caCert)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: cfg.serverName}, nil
}

// singleUseDialer: one gRPC connection and tunnel per dial, as kube-apiserver has done since
// the egress selector was introduced.
type singleUseDialer struct {
	target string
	opts   []grpc.DialOption
}

func (s *singleUseDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	tunnel, err := client.CreateSingleUseGrpcTunnelWithContext(ctx, context.TODO(), s.target, s.opts...)
	if err != nil {
		return nil, fmt.Errorf("create tunnel: %w", err)
	}
	c, err := tunnel.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tunneledConn{Conn: c, done: tunnel.Done()}, nil
}

func (s *singleUseDialer) Close() {}

// reusableDialer: one gRPC connection for the program, one Proxy stream per dial (the
// ReusableTunnel of konnectivity-client v0.37, used by the newest kube-apiserver over UDS).
type reusableDialer struct {
	tunnel client.ReusableTunnel
}

func (r *reusableDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return r.tunnel.DialContext(ctx, "tcp", addr)
}

func (r *reusableDialer) Close() { _ = r.tunnel.Close() }

// connectDialer: HTTP CONNECT, over a Unix socket or TLS, byte for byte as kube-apiserver.
type connectDialer struct {
	cfg       *config
	tlsConfig *tls.Config
}

// statusError is a CONNECT answered with something other than 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("proxy answered %d %s: %q", e.code, http.StatusText(e.code), e.body)
}

func (c *connectDialer) open(ctx context.Context) (net.Conn, error) {
	if c.cfg.uds != "" {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.cfg.uds)
	}
	d := tls.Dialer{Config: c.tlsConfig}
	return d.DialContext(ctx, "tcp", c.cfg.addr)
}

func (c *connectDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, "127.0.0.1")
	return readConnectResponse(conn)
}

// readConnectResponse is kube-apiserver's tunnelHTTPConnect check: the head must parse, the
// status must be 200, and nothing may follow the head in the same read.
func readConnectResponse(conn net.Conn) (net.Conn, error) {
	br := bufio.NewReader(io.LimitReader(conn, http.DefaultMaxHeaderBytes))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading CONNECT response: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		conn.Close()
		return nil, &statusError{code: res.StatusCode, body: string(body)}
	}
	if br.Buffered() > 0 {
		conn.Close()
		return nil, fmt.Errorf("unexpected %d bytes of buffered data after the CONNECT response", br.Buffered())
	}
	return conn, nil
}

func (c *connectDialer) Close() {}
