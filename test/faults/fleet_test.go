package faults_test

import (
	"context"
	"encoding/json"
	"errors"
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

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// fleet keeps consumer processes running, one per slot, starting another
// whenever one ends, as a supervisor restarting a crashed pod would.
type fleet struct {
	t      *testing.T
	queue  string
	ledger string

	mu      sync.Mutex
	slots   []*child
	done    bool
	starts  int
	byTest  int // ended by the test's SIGKILL
	next    int // the slot killOne tries next
	outs    []string
	poison  int // exited on a poison
	other   []string
	wg      sync.WaitGroup
	stopped chan struct{}
}

// run adds a slot whose consumers dial urls, in order.
func (f *fleet) run(urls []string) {
	f.mu.Lock()
	if f.stopped == nil {
		f.stopped = make(chan struct{})
	}
	slot := len(f.slots)
	f.slots = append(f.slots, nil)
	f.mu.Unlock()
	f.wg.Go(func() {
		for {
			c, err := f.start(urls)
			f.mu.Lock()
			if f.done {
				f.mu.Unlock()
				if c != nil {
					_ = c.cmd.Process.Signal(syscall.SIGTERM)
					<-c.done
				}
				return
			}
			if err != nil {
				f.other = append(f.other, err.Error())
				f.mu.Unlock()
				time.Sleep(time.Second)
				continue
			}
			f.starts++
			f.slots[slot] = c
			f.mu.Unlock()
			var err2 error
			select {
			case err2 = <-c.done:
			case <-f.stopped:
				_ = c.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case err2 = <-c.done:
				case <-time.After(20 * time.Second):
					_ = c.cmd.Process.Kill()
					err2 = <-c.done
				}
			}
			c.done <- err2
			f.mu.Lock()
			f.slots[slot] = nil
			var ee *exec.ExitError
			switch {
			case f.done:
			case errors.As(err2, &ee) && ee.ExitCode() == poisonExit:
				f.poison++
			case errors.As(err2, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
				f.byTest++
			default:
				f.other = append(f.other, fmt.Sprintf("consumer %d ended: %v", c.cmd.Process.Pid, err2))
			}
			done := f.done
			f.mu.Unlock()
			if done {
				return
			}
		}
	})
}

// start runs TestHelperQuorumConsumer in a child process.
func (f *fleet) start(urls []string) (*child, error) {
	out, err := os.CreateTemp(f.t.TempDir(), "consumer-*.out")
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQuorumConsumer$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envQuorumChild+"=1", envQuorumURLs+"="+strings.Join(urls, " "),
		envQueue+"="+f.queue, envLedger+"="+f.ledger)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan error, 1), out: out.Name()}
	go func() { c.done <- cmd.Wait() }()
	f.mu.Lock()
	f.outs = append(f.outs, out.Name())
	f.mu.Unlock()
	return c, nil
}

// showLast logs the output of the last n consumers started.
func (f *fleet) showLast(n int) {
	f.mu.Lock()
	outs := f.outs[max(len(f.outs)-n, 0):]
	f.mu.Unlock()
	for _, out := range outs {
		b, _ := os.ReadFile(out)
		f.t.Logf("consumer output %s:\n%s", filepath.Base(out), tail(string(b), 40))
	}
}

// kill sends SIGKILL to the consumer in slot, if one runs there, and
// returns its pid.
func (f *fleet) kill(slot int) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.slots[slot]
	if c == nil {
		return 0, false
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, false
	}
	return c.cmd.Process.Pid, true
}

// killOne sends SIGKILL to the consumer in the next slot that has one
// running, and logs it.
func (f *fleet) killOne(t *testing.T, name string, at int) {
	t.Helper()
	for range len(f.slots) {
		f.next = (f.next + 1) % len(f.slots)
		if pid, ok := f.kill(f.next); ok {
			t.Logf("%s: consumer %d killed with SIGKILL at %d acceptances", name, pid, at)
			return
		}
	}
	t.Logf("%s: no consumer running to kill at %d acceptances", name, at)
}

// stop ends the consumers with SIGTERM (each settles what it holds) and
// waits for them; it may be called more than once.
func (f *fleet) stop() {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		f.wg.Wait()
		return
	}
	f.done = true
	if f.stopped != nil {
		close(f.stopped)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// String reads "23 started, 16 exited on a poison, 4 killed by the test".
func (f *fleet) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("%d started, %d exited on a poison, %d killed by the test", f.starts, f.poison, f.byTest)
	if len(f.other) > 0 {
		s += fmt.Sprintf(", and otherwise: %v", head(f.other))
	}
	return s
}

// TestHelperQuorumConsumer is not a test: it is a consumer process of
// TestFaultClusterQuorumLimit, and returns at once unless started as one.
// It handles as TestHelperConsumer's "consumer" mode does, after 20 ms of
// work, and exits with poisonExit on a poison, writing "poison <id>
// <x-delivery-count>" to the ledger first.
func TestHelperQuorumConsumer(t *testing.T) {
	if os.Getenv(envQuorumChild) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	urls := strings.Fields(os.Getenv(envQuorumURLs))
	tr := dial(t, urls[0], log, rabbitmq.WithURLs(urls[1:]...))
	path := os.Getenv(envLedger)
	poisons, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer poisons.Close()
	handle := ledgerHandler(t, path)
	q := os.Getenv(envQueue)
	mux := acemq.NewMux()
	mux.HandleFunc(q, func(ctx context.Context, m *acemq.Message) ack.Ack {
		var j quorumJob
		if json.Unmarshal(m.Body(), &j) == nil && j.Poison {
			_, _ = fmt.Fprintf(poisons, "poison %s %d\n", m.ID(), m.Envelope().DeliveryCount)
			os.Exit(poisonExit)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ack.Retry(ctx.Err())
		}
		return handle.ServeMessage(ctx, m)
	})
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: quorumLimitPolicy(), Logger: log, PublishTimeout: 5 * time.Second,
		Queues: map[string]acemq.QueueConfig{q: quorumLimitConfig()}}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
