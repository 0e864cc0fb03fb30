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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// Environment of a consumer child process.
const (
	envChild  = "ACEMQ_FAULTS_CHILD" // the mode: "consumer"
	envURL    = "ACEMQ_FAULTS_URL"
	envQueue  = "ACEMQ_FAULTS_QUEUE"
	envLedger = "ACEMQ_FAULTS_LEDGER"
	// For the "idempotent" mode: the database and the tables of the
	// effects and of the idempotency store.
	envPostgres = "ACEMQ_FAULTS_POSTGRES"
	envEffects  = "ACEMQ_FAULTS_EFFECTS"
	envStore    = "ACEMQ_FAULTS_STORE"
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
		child := startConsumer(t, "consumer", url, q, envLedger+"="+path)
		polltest.Within(t, 30*time.Second, fmt.Sprintf("consumer %d accepted %d", i+1, at), func() bool {
			return len(readLedger(t, path)) >= at
		})
		child.kill(t, syscall.SIGKILL)
	}
	last := startConsumer(t, "consumer", url, q, envLedger+"="+path)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, func() bool {
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

// startConsumer runs TestHelperConsumer in a child process consuming queue,
// in mode, with env added to its environment.
func startConsumer(t *testing.T, mode, url, queue string, env ...string) *child {
	t.Helper()
	out := filepath.Join(t.TempDir(), "consumer.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConsumer$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), envChild+"="+mode, envURL+"="+url, envQueue+"="+queue), env...)
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
			t.Logf("consumer %d output:\n%s", cmd.Process.Pid, tail(string(b), 60))
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
	eachRecord(t, path, "accept ", func(id string) { out[id]++ })
	return out
}

// eachRecord calls f with the rest of every line of the children's
// record at path that starts with prefix; a record not written yet holds
// none.
func eachRecord(t *testing.T, path, prefix string, f func(rest string)) {
	t.Helper()
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f(rest)
		}
	}
}

// TestHelperConsumer is not a test: it is the consumer process of
// TestFaultConsumerKilled (mode "consumer") and of the idempotent variant
// (mode "idempotent"), or the outbox relay process of TestFaultOutboxRelay
// (mode "relay"), and returns at once unless started as one.
func TestHelperConsumer(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var h acemq.Handler
	switch mode {
	case "consumer":
		h = ledgerHandler(t, os.Getenv(envLedger))
	case "idempotent":
		pool := brokertest.OpenPool(t, os.Getenv(envPostgres), brokertest.PoolConfig{})
		var dups atomic.Int64
		h = idempotentHandler(newStore(t, pool, os.Getenv(envStore)), effects{pool: pool, table: os.Getenv(envEffects)}, &dups)
	case "idempotent-tx":
		pool := brokertest.OpenPool(t, os.Getenv(envPostgres), brokertest.PoolConfig{})
		h = transactionalHandler(newStore(t, pool, os.Getenv(envStore)), effects{pool: pool, table: os.Getenv(envEffects)})
	case "relay":
		runRelay(t, ctx)
		return
	case "idempotent-lease":
		runIdempotentLease(t, ctx)
		return
	case "slip":
		runSlipConsumer(t, ctx)
		return
	case "breaker", "ladder":
		runBreakerConsumer(t, ctx, mode == "breaker")
		return
	default:
		t.Fatalf("unknown consumer mode %q", mode)
	}
	// The parent shows this process's output when its test fails.
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	tr := dial(t, os.Getenv(envURL), log)
	mux := acemq.NewMux()
	mux.Handle(os.Getenv(envQueue), h)
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: testPolicy(), Logger: log}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// ledgerHandler follows each message's script and writes each acceptance
// to the ledger file before it returns it.
func ledgerHandler(t *testing.T, path string) acemq.Handler {
	ledger, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	var mu sync.Mutex
	return acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
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
}
