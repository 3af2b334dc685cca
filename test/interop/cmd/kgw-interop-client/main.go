// Command kgw-interop-client dials through a Konnectivity proxy server the way kube-apiserver
// does, with the upstream konnectivity-client library for gRPC and kube-apiserver's own CONNECT
// handshake for HTTP CONNECT, runs the scenarios it is asked for, and prints one JSON line of
// results per scenario. It exits 1 when any scenario failed and 2 on bad flags.
//
// Every address it is given must be on loopback; it refuses anything else.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

type config struct {
	transport   string // grpc | grpc-reusable | connect
	uds         string
	addr        string
	caCert      string
	cert        string
	key         string
	serverName  string
	httpBackend string
	closedAddr  string
	hangAddr    string
	downloadN   int64
	uploadN     int64
	timeout     time.Duration
}

// result is one JSON line: fixed fields first, then whatever the scenario reports.
type result map[string]any

func main() {
	var cfg config
	var scenarios string
	flag.StringVar(&cfg.transport, "transport", "grpc",
		"grpc: a single-use tunnel per dial (CreateSingleUseGrpcTunnelWithContext); "+
			"grpc-reusable: one connection, a Proxy stream per dial (CreateGRPCTunnel); "+
			"connect: HTTP CONNECT")
	flag.StringVar(&cfg.uds, "uds", "", "Unix socket of the proxy server frontend (plaintext)")
	flag.StringVar(&cfg.addr, "addr", "", "host:port of the proxy server frontend (TLS)")
	flag.StringVar(&cfg.caCert, "ca-cert", "", "CA that signed the proxy server's certificate")
	flag.StringVar(&cfg.cert, "cert", "", "client certificate (mTLS)")
	flag.StringVar(&cfg.key, "key", "", "client key (mTLS)")
	flag.StringVar(&cfg.serverName, "server-name", "", "TLS server name (default: host of -addr)")
	flag.StringVar(&cfg.httpBackend, "http-backend", "", "host:port of an HTTP backend with /hello, /bytes?n=, POST /sha256")
	flag.StringVar(&cfg.closedAddr, "closed-addr", "", "host:port where nothing listens")
	flag.StringVar(&cfg.hangAddr, "hang-addr", "", "host:port whose connects hang")
	flag.Int64Var(&cfg.downloadN, "download-bytes", 32<<20, "size of the download scenario")
	flag.Int64Var(&cfg.uploadN, "upload-bytes", 8<<20, "size of the upload scenario")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "time limit of one scenario")
	flag.StringVar(&scenarios, "scenarios", "http,download,upload,closed-port,dial-cancel,close-client,close-backend",
		"comma-separated scenarios: "+strings.Join(scenarioNames(), ", "))
	flag.Parse()

	if err := validate(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kgw-interop-client:", err)
		os.Exit(2)
	}
	d, err := newDialer(&cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgw-interop-client:", err)
		os.Exit(2)
	}
	defer d.Close()

	failed := false
	out := json.NewEncoder(os.Stdout)
	for _, name := range strings.Split(scenarios, ",") {
		name = strings.TrimSpace(name)
		run, ok := scenarioTable[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "kgw-interop-client: unknown scenario %q\n", name)
			os.Exit(2)
		}
		r := runScenario(name, run, &cfg, d)
		if r["ok"] != true {
			failed = true
		}
		_ = out.Encode(r)
	}
	if failed {
		os.Exit(1)
	}
}

func runScenario(name string, run scenarioFunc, cfg *config, d dialer) result {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	r := result{}
	start := time.Now()
	err := run(ctx, &env{cfg: cfg, d: d}, r)
	r["scenario"] = name
	r["transport"] = cfg.transport
	r["target"] = target(cfg)
	r["ms"] = time.Since(start).Milliseconds()
	r["ok"] = err == nil
	if err != nil {
		r["error"] = err.Error()
	}
	return r
}

func target(cfg *config) string {
	if cfg.uds != "" {
		return "uds"
	}
	return "tcp-mtls"
}

func validate(cfg *config) error {
	if (cfg.uds == "") == (cfg.addr == "") {
		return fmt.Errorf("give exactly one of -uds and -addr")
	}
	switch cfg.transport {
	case "grpc", "grpc-reusable", "connect":
	default:
		return fmt.Errorf("-transport %q is not grpc, grpc-reusable or connect", cfg.transport)
	}
	if cfg.addr != "" {
		if cfg.caCert == "" || cfg.cert == "" || cfg.key == "" {
			return fmt.Errorf("-addr needs -ca-cert, -cert and -key (kube-apiserver always uses mTLS over TCP)")
		}
	}
	for _, a := range []string{cfg.addr, cfg.httpBackend, cfg.closedAddr, cfg.hangAddr} {
		if a == "" {
			continue
		}
		if err := requireLoopback(a); err != nil {
			return err
		}
	}
	return nil
}

// requireLoopback keeps this program from ever sending traffic off the machine.
func requireLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q: %v", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", hostport)
	}
	return nil
}
