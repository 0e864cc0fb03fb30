package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// What an acemq Server declares for a queue, to hold acemq topology's
// declarations against: the tests of topology_partitions_test.go and
// rabbitmq_topology_test.go.

// declaring records every topology declared through it.
type declaring struct {
	transport.Transport
	mu   sync.Mutex
	tops []transport.Topology
}

func (d *declaring) Declare(ctx context.Context, t transport.Topology) error {
	d.mu.Lock()
	d.tops = append(d.tops, t)
	d.mu.Unlock()
	return d.Transport.Declare(ctx, t)
}

// declared is every declaration recorded, each as a line: what it is, its
// name and its arguments, sorted, each once.
func (d *declaring) declared() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var lines []string
	for _, t := range d.tops {
		lines = append(lines, declarationLines(t)...)
	}
	return compactSorted(lines)
}

// declarationLines is t's declarations as declared() writes them.
func declarationLines(t transport.Topology) []string {
	var lines []string
	for _, x := range t.Exchanges {
		lines = append(lines, fmt.Sprintf("exchange %s %s %v %v", x.Name, x.Kind, x.Durable, normalArgs(x.Args)))
	}
	for _, q := range t.Queues {
		lines = append(lines, fmt.Sprintf("queue %s %v %v home %d", q.Name, q.Durable, normalArgs(q.Args), q.Home))
	}
	for _, b := range t.Bindings {
		lines = append(lines, fmt.Sprintf("binding %s %s %s", b.Queue, b.Exchange, b.Key))
	}
	for _, b := range t.ExchangeBindings {
		lines = append(lines, fmt.Sprintf("exchange-binding %s %s %s", b.Destination, b.Source, b.Key))
	}
	return lines
}

// jsonLines is topology --json's declarations as declared() writes them.
func jsonLines(t *testing.T, out string) []string {
	t.Helper()
	var got topologyOut
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var top transport.Topology
	for _, x := range got.Exchanges {
		top.Exchanges = append(top.Exchanges, transport.Exchange{Name: x.Name, Kind: x.Kind, Durable: x.Durable, Args: x.Args})
	}
	for _, q := range got.Queues {
		top.Queues = append(top.Queues, transport.Queue{Name: q.Name, Durable: q.Durable, Args: q.Args, Home: q.Home})
	}
	for _, b := range got.Bindings {
		top.Bindings = append(top.Bindings, transport.Binding{Queue: b.Queue, Exchange: b.Exchange, Key: b.Key})
	}
	for _, b := range got.ExchangeBindings {
		top.ExchangeBindings = append(top.ExchangeBindings, transport.ExchangeBinding{Destination: b.Destination, Source: b.Source, Key: b.Key})
	}
	return compactSorted(declarationLines(top))
}

// normalArgs writes numbers the one way, whether declared (int64) or read
// back from JSON (float64).
func normalArgs(args map[string]any) map[string]string {
	out := make(map[string]string, len(args))
	for k, v := range args {
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			v = int64(f)
		}
		out[k] = fmt.Sprint(v)
	}
	return out
}

func compactSorted(lines []string) []string {
	slices.Sort(lines)
	return slices.Compact(lines)
}

// serveOnce runs a Server of queue with c on tr until it is ready, and
// stops it: nil when it started, else what Run returned (a declaration
// the broker refused, say).
func serveOnce(t *testing.T, tr transport.Transport, queue string, c acemq.QueueConfig) error {
	t.Helper()
	mux := acemq.NewMux()
	mux.Handle(queue, acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }))
	srv := &acemq.Server{Transport: tr, Handler: mux, Logger: zap.NewNop(), Queues: map[string]acemq.QueueConfig{queue: c}}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil before the server was ready")
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("the server was neither ready nor stopped in 60s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	return nil
}
