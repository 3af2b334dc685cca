// Command kgw-bench-client is the benchmark's gRPC client (bench/harness/go-client.ts): it dials
// through a Konnectivity server as kube-apiserver does, with the upstream konnectivity-client
// library, a single-use tunnel (CreateSingleUseGrpcTunnelWithContext, its own mTLS connection)
// per dial, and speaks the benchmark backend's protocol (bench/harness/protocol.ts) through it.
// It writes its figures as JSON to -out and exits 0, or writes the error to stderr and exits 1
// (2 on bad flags). Every address must be on loopback.
//
// Modes:
//
//	latency   -count sequential dials, each timed from the start of the dial to the PONG of a
//	          PING sent as soon as the tunnel is up: {"dialMs":[...]}
//	rate      -count dials, -concurrency at a time, each to the PONG and closed:
//	          {"dials":N,"seconds":S}, S from the first dial's start to the last one's end
//	download  one dial, then -bytes of the pattern from the backend, every byte checked:
//	          {"bytes":N,"seconds":S}, S from the command to the last byte
//	upload    one dial, then -bytes of the pattern to the backend, which checks every byte:
//	          {"bytes":N,"seconds":S}, S from the command to the backend's last acknowledgement
//	pattern   no network: -bytes of the pattern from -start into -out (the cross-check test)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

type config struct {
	mode        string
	addr        string
	caCert      string
	cert        string
	key         string
	serverName  string
	target      string
	count       int
	concurrency int
	bytes       int64
	start       int
	chunk       int
	out         string
	timeout     time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", "", "latency | rate | download | upload | pattern")
	flag.StringVar(&cfg.addr, "addr", "", "host:port of the server's gRPC frontend (mTLS)")
	flag.StringVar(&cfg.caCert, "ca-cert", "", "CA that signed the server's certificate")
	flag.StringVar(&cfg.cert, "cert", "", "client certificate")
	flag.StringVar(&cfg.key, "key", "", "client key")
	flag.StringVar(&cfg.serverName, "server-name", "", "TLS server name (default: host of -addr)")
	flag.StringVar(&cfg.target, "target", "", "host:port of the benchmark backend")
	flag.IntVar(&cfg.count, "count", 100, "dials (latency, rate)")
	flag.IntVar(&cfg.concurrency, "concurrency", 1, "dials at once (rate)")
	flag.Int64Var(&cfg.bytes, "bytes", 0, "bytes to move (download, upload, pattern)")
	flag.IntVar(&cfg.start, "start", 0, "where the transfer enters the pattern")
	flag.IntVar(&cfg.chunk, "chunk", defaultChunkBytes, "bytes per write of an upload (one DATA packet each) and per read of a download")
	flag.StringVar(&cfg.out, "out", "", "file the JSON result (or the pattern) is written to")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Second, "time limit of one dial; a transfer may take 20 times this")
	flag.Parse()
	if cfg.out == "" || cfg.mode == "" {
		fmt.Fprintln(os.Stderr, "-mode and -out are required")
		os.Exit(2)
	}
	if cfg.chunk < 1 || cfg.chunk > maxChunkBytes {
		fmt.Fprintf(os.Stderr, "-chunk must be between 1 and %d bytes\n", maxChunkBytes)
		os.Exit(2)
	}
	if cfg.mode != "pattern" {
		for _, a := range []string{cfg.addr, cfg.target} {
			if err := mustBeLoopback(a); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	result, err := run(&cfg)
	if err == nil && result != nil {
		var b []byte
		if b, err = json.Marshal(result); err == nil {
			err = os.WriteFile(cfg.out, b, 0o600)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.mode, err)
		os.Exit(1)
	}
}

func run(cfg *config) (any, error) {
	if cfg.mode == "pattern" {
		return nil, os.WriteFile(cfg.out, patternBytes(cfg.start, cfg.bytes), 0o600)
	}
	tlsConfig, err := clientTLS(cfg)
	if err != nil {
		return nil, err
	}
	d := newTunnelDialer(cfg, tlsConfig)
	switch cfg.mode {
	case "latency":
		return latency(d, cfg.count)
	case "rate":
		return rate(d, cfg.count, cfg.concurrency)
	case "download":
		return download(d, cfg.bytes, cfg.start, cfg.chunk)
	case "upload":
		return upload(d, cfg.bytes, cfg.start, cfg.chunk)
	}
	return nil, fmt.Errorf("unknown mode %q", cfg.mode)
}

func patternBytes(start int, n int64) []byte {
	s := newPatternSource(start)
	out := make([]byte, 0, n)
	for left := n; left > 0; {
		b := s.next(int(min(left, patternPeriod)))
		out = append(out, b...)
		left -= int64(len(b))
	}
	return out
}

// clientTLS is kube-apiserver's getTLSConfig: client certificate, CA bundle, optional server
// name, no session cache (every tunnel makes a full handshake, as kube-apiserver's does).
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

func mustBeLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q: %w", hostport, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", hostport)
	}
	return nil
}
