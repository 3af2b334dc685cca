package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client"
)

// The backend's protocol (bench/harness/protocol.ts).
const (
	opPing     = 0x50
	opDownload = 0x44
	opUpload   = 0x55
	pong       = 0x4b
	ackBytes   = 8
	mismatch   = uint64(1) << 63
	// Bytes per write of an upload and per read of a download, unless -chunk says otherwise.
	defaultChunkBytes = 256 * 1024
	maxChunkBytes     = 16 * 1024 * 1024
	// A transfer may take this many dial time limits.
	transferTimeouts = 20
)

type tunnelDialer struct {
	cfg  *config
	opts []grpc.DialOption
}

// newTunnelDialer mirrors kube-apiserver's egress selector over TCP: WithBlock,
// WithReturnConnectionError, mTLS.
func newTunnelDialer(cfg *config, tlsConfig *tls.Config) *tunnelDialer {
	return &tunnelDialer{cfg: cfg, opts: []grpc.DialOption{
		grpc.WithBlock(),
		grpc.WithReturnConnectionError(),
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
	}}
}

// dial opens a single-use tunnel (its own gRPC connection) and a connection through it to the
// backend; closing the connection ends the tunnel.
func (d *tunnelDialer) dial(ctx context.Context) (net.Conn, error) {
	tunnel, err := client.CreateSingleUseGrpcTunnelWithContext(ctx, context.Background(), d.cfg.addr, d.opts...)
	if err != nil {
		return nil, fmt.Errorf("create tunnel: %w", err)
	}
	c, err := tunnel.DialContext(ctx, "tcp", d.cfg.target)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", d.cfg.target, err)
	}
	return c, nil
}

// firstByte dials, sends a PING and reads its PONG: the dial to the first byte.
func (d *tunnelDialer) firstByte() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout)
	defer cancel()
	t0 := time.Now()
	c, err := d.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(t0.Add(d.cfg.timeout))
	if _, err := c.Write(command(opPing, 0, 0)); err != nil {
		return 0, fmt.Errorf("PING: %w", err)
	}
	b := []byte{0}
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, fmt.Errorf("PONG: %w", err)
	}
	if b[0] != pong {
		return 0, fmt.Errorf("answer to PING was 0x%x, not PONG", b[0])
	}
	return time.Since(t0), nil
}

func command(op byte, n int64, start int) []byte {
	if op == opPing {
		b := make([]byte, 9)
		b[0] = op
		binary.BigEndian.PutUint64(b[1:], uint64(n))
		return b
	}
	b := make([]byte, 13)
	b[0] = op
	binary.BigEndian.PutUint64(b[1:], uint64(n))
	binary.BigEndian.PutUint32(b[9:], uint32(start))
	return b
}

func latency(d *tunnelDialer, count int) (any, error) {
	out := make([]float64, 0, count)
	for range count {
		t, err := d.firstByte()
		if err != nil {
			return nil, err
		}
		out = append(out, float64(t.Nanoseconds())/1e6)
	}
	return map[string]any{"dialMs": out}, nil
}

func rate(d *tunnelDialer, count, concurrency int) (any, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(count) {
				if _, err := d.firstByte(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return map[string]any{"dials": count, "seconds": time.Since(t0).Seconds()}, nil
}

func download(d *tunnelDialer, n int64, start, chunkBytes int) (any, error) {
	c, deadline, err := d.transferConn()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t0 := time.Now()
	if _, err := c.Write(command(opDownload, n, start)); err != nil {
		return nil, err
	}
	check := newPatternCheck(start)
	buf := make([]byte, chunkBytes)
	for check.checked < n {
		k, err := c.Read(buf[:min(int64(len(buf)), n-check.checked)])
		if k > 0 && !check.accept(buf[:k]) {
			return nil, fmt.Errorf("downloaded bytes differ from the pattern at %d", check.checked)
		}
		if err != nil {
			return nil, fmt.Errorf("after %d of %d bytes: %w", check.checked, n, err)
		}
		if time.Now().After(deadline) {
			return nil, errors.New("download timed out")
		}
	}
	return map[string]any{"bytes": n, "seconds": time.Since(t0).Seconds()}, nil
}

func upload(d *tunnelDialer, n int64, start, chunkBytes int) (any, error) {
	c, _, err := d.transferConn()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t0 := time.Now()
	acked := make(chan error, 1)
	go func() { acked <- readAcks(c, n) }()
	if _, err := c.Write(command(opUpload, n, start)); err != nil {
		return nil, err
	}
	src := newPatternSource(start)
	for left := n; left > 0; {
		b := src.next(int(min(left, int64(chunkBytes))))
		if _, err := c.Write(b); err != nil {
			return nil, fmt.Errorf("after %d of %d bytes: %w", n-left, n, err)
		}
		left -= int64(len(b))
	}
	if err := <-acked; err != nil {
		return nil, err
	}
	return map[string]any{"bytes": n, "seconds": time.Since(t0).Seconds()}, nil
}

// readAcks reads the backend's running totals until it acknowledges all n bytes.
func readAcks(c net.Conn, n int64) error {
	b := make([]byte, ackBytes)
	for {
		if _, err := io.ReadFull(c, b); err != nil {
			return fmt.Errorf("acknowledgement: %w", err)
		}
		total := binary.BigEndian.Uint64(b)
		if total&mismatch != 0 {
			return fmt.Errorf("uploaded bytes differ from the pattern at %d", total&^mismatch)
		}
		if int64(total) >= n {
			return nil
		}
	}
}

// transferConn dials for a transfer, with a deadline of transferTimeouts dial time limits.
func (d *tunnelDialer) transferConn() (net.Conn, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout)
	defer cancel()
	c, err := d.dial(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	deadline := time.Now().Add(transferTimeouts * d.cfg.timeout)
	_ = c.SetDeadline(deadline)
	return c, deadline, nil
}
