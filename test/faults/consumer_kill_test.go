package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/brokertest"
)

// Environment of a consumer child process.
const (
	envChild  = "ACEMQ_FAULTS_CHILD" // the mode: "consumer"
	envURL    = "ACEMQ_FAULTS_URL"
	envQueue  = "ACEMQ_FAULTS_QUEUE"
	envLedger = "ACEMQ_FAULTS_LEDGER"
)

// TestFaultConsumerKilled is scenario 3: the consumer runs in a child
// process (this test binary again, in TestHelperConsumer) and is killed with
// SIGKILL twice while it handles messages, with retries waiting in the
// process and on rungs; a third one finishes the work. The children write
// each acceptance to a ledger file before they return it.
func TestFaultConsumerKilled(t *testing.T) {
	t.Parallel()
	const name = "consumer-kill9"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	pol := testPolicy()
	pubTr := dial(t, url, log)
	if err := pubTr.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger")
	js := jobs(name, 300)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 2, 20*time.Millisecond, stats) }()

	for i, at := range []int{60, 150} {
		child := startConsumer(t, url, q, path)
		eventually(t, 30*time.Second, fmt.Sprintf("consumer %d accepted %d", i+1, at), func() bool {
			return len(readLedger(t, path)) >= at
		})
		child.kill(t, syscall.SIGKILL)
	}
	last := startConsumer(t, url, q, path)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !until(60*time.Second, func() bool {
		return sk.settled(&ledger{accepted: readLedger(t, path)}, sent)()
	}) {
		t.Errorf("%s: not settled within 60s", name)
	}
	last.kill(t, syscall.SIGTERM)
	sk.collect(t, name, sent, readLedger(t, path), pol).report(t)
}

// child is a consumer process.
type child struct {
	cmd  *exec.Cmd
	done chan error
	out  string
}

// startConsumer runs TestHelperConsumer in a child process consuming queue.
func startConsumer(t *testing.T, url, queue, ledger string) *child {
	t.Helper()
	out := filepath.Join(t.TempDir(), "consumer.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConsumer$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"=consumer", envURL+"="+url, envQueue+"="+queue, envLedger+"="+ledger)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1), out: out}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		c.done <- nil
		if t.Failed() {
			b, _ := os.ReadFile(out)
			t.Logf("consumer %d output:\n%s", cmd.Process.Pid, tail(string(b), 40))
		}
	})
	return c
}

// kill sends sig and waits for the process to end.
func (c *child) kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case err := <-c.done:
		c.done <- err
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("the consumer did not stop cleanly on SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the consumer did not end within 30s of %v", sig)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readLedger counts the acceptances the children recorded, by id.
func readLedger(t *testing.T, path string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "accept "); ok {
			out[id]++
		}
	}
	return out
}

// TestHelperConsumer is not a test: it is the consumer process of
// TestFaultConsumerKilled, and returns at once unless started as one.
func TestHelperConsumer(t *testing.T) {
	if os.Getenv(envChild) != "consumer" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ledger, err := os.OpenFile(os.Getenv(envLedger), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	var mu sync.Mutex
	log := testLogger(t)
	tr := dial(t, os.Getenv(envURL), log)
	q := os.Getenv(envQueue)
	h := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ack.Retry(ctx.Err())
		}
		a := script(m, j)
		if a.Outcome() == ack.OutcomeAccept {
			// One write per line: a kill never leaves half a line.
			mu.Lock()
			_, err := ledger.WriteString("accept " + m.ID() + "\n")
			mu.Unlock()
			if err != nil {
				return ack.Retry(err)
			}
			// The work is done and not yet acked: a kill now is a
			// redelivery of work already done.
			time.Sleep(5 * time.Millisecond)
		}
		return a
	})
	mux := acemq.NewMux()
	mux.Handle(q, h)
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: testPolicy(), Logger: log}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
