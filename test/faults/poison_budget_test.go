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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// envPoisonBudgetChild names, in a child process, the queue of
// TestFaultPoisonBudget's consumer.
const envPoisonBudgetChild = "ACEMQ_FAULTS_POISON_BUDGET_CHILD"

// poisonBudgetLimit is the work queue's QueueConfig.DeliveryLimit.
const poisonBudgetLimit = 3

// poisonBudgetConfig is the work queue as docs/operators.md's "What to
// set" declares it: a quorum queue and a delivery limit, the prefetch and
// concurrency left at their defaults (32 and 4).
func poisonBudgetConfig() acemq.QueueConfig {
	return acemq.QueueConfig{Args: map[string]any{"x-queue-type": "quorum"}, DeliveryLimit: poisonBudgetLimit}
}

// TestFaultPoisonBudget is issue 23's item 2: a quorum work queue with a
// delivery limit of 3, served with the default prefetch by a consumer
// process (this test binary again, TestHelperPoisonBudget) that a
// supervisor loop starts again whenever it ends. One poison at the head of
// the queue and 20 healthy messages behind it, all published before the
// first consumer starts: the first delivery is not redelivered, so the
// first consumer takes them all (the prefetch) and dies on the poison
// (os.Exit, as an out-of-memory kill or a cgo crash would) with the
// healthy ones in flight. The broker counts one delivery against each:
// that first crash is unavoidable. Every consumer after it starts on
// probation and takes the returned messages one at a time, so each later
// crash returns the poison alone: it is delivered with x-delivery-count 0
// to 3 and then moved to the .dlq by the broker, and the healthy ones are
// each handled once, having spent at most the first crash's delivery.
//
// Before the probation the healthy ones went down with the poison every
// time: after three crashes all 20 were in the .dlq, 18 never handled.
func TestFaultPoisonBudget(t *testing.T) {
	t.Parallel()
	const name = "poison-budget"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	pol := testPolicy()

	// The work queue declared here as the consumers declare it, so that
	// every message is in it before the first consumer starts.
	args := map[string]any{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int64(poisonBudgetLimit),
		"x-dead-letter-exchange":    retry.DeadLetterExchange,
		"x-dead-letter-routing-key": q,
		"x-dead-letter-strategy":    "at-least-once",
		"x-overflow":                "reject-publish",
	}
	pubTr := dial(t, url, log)
	if err := pubTr.Declare(context.Background(), acemq.Topology(q, pol, args)); err != nil {
		t.Fatal(err)
	}
	qjs := []quorumJob{{job: job{ID: name + "-poison"}, Poison: true}}
	for i := range 20 {
		qjs = append(qjs, quorumJob{job: job{ID: fmt.Sprintf("%s-%04d", name, i)}})
	}
	stats := &publishStats{}
	// One producer, so that the poison is at the head.
	sent := publishQuorumJobs(t, pubTr, q, qjs, 1, 0, stats, nil)
	t.Logf("%s: producer: %s", name, stats)

	path := filepath.Join(t.TempDir(), "ledger")
	sup := superviseConsumer(t, url, q, path)
	sk := newSink(url, q)
	if !polltest.Until(90*time.Second, func() bool {
		return sk.settled(&ledger{accepted: readLedger(t, path)}, sent)()
	}) {
		t.Errorf("%s: not settled within 90s", name)
	}
	// The consumer started after the last crash stops cleanly on SIGTERM
	// once it consumes (a SIGTERM before it set its handler would kill it).
	polltest.Within(t, 30*time.Second, "the last consumer consumes "+q, func() bool {
		info, err := pubTr.Inspect(context.Background(), q)
		return err == nil && info.Consumers > 0
	})
	crashes := sup.stop(t)

	seen := readSeen(t, path)
	poison := seen[qjs[0].ID]
	t.Logf("%s: %d consumer processes died on the poison; it was delivered with x-delivery-count %v", name, crashes, poison)
	if want := []int{0, 1, 2, 3}; !slices.Equal(poison, want) {
		t.Errorf("the poison was delivered with x-delivery-count %v, want %v (a limit of %d)", poison, want, poisonBudgetLimit)
	}
	if crashes != poisonBudgetLimit+1 {
		t.Errorf("%d consumers died on the poison, want %d", crashes, poisonBudgetLimit+1)
	}
	spent := 0
	for _, j := range qjs[1:] {
		counts := seen[j.ID]
		if len(counts) == 0 {
			t.Errorf("%s never reached a handler", j.ID)
			continue
		}
		if last := counts[len(counts)-1]; last > 1 {
			t.Errorf("%s reached a handler with x-delivery-count %v: its budget was spent beyond the first crash", j.ID, counts)
		} else if last == 1 {
			spent++
		}
	}
	t.Logf("%s: %d of the 20 healthy messages were in flight at the first crash (x-delivery-count 1), none spent more", name, spent)
	tl := sk.collect(t, name, sent, readLedger(t, path), pol)
	for _, j := range qjs[1:] {
		if n := tl.dlq[j.ID]; n != 0 {
			t.Errorf("healthy %s is in %s %d times", j.ID, acemq.DeadLetterQueue(q), n)
		}
	}
	if tl.dlq[qjs[0].ID] != 1 {
		t.Errorf("the poison is in %s %d times, want once", acemq.DeadLetterQueue(q), tl.dlq[qjs[0].ID])
	}
	tl.report(t)
}

// supervisor keeps one consumer process running, starting another
// whenever it ends, as a supervisor restarting a crashed pod would.
type supervisor struct {
	mu      sync.Mutex
	cur     *child
	done    bool
	crashes int      // ended on a poison
	other   []string // ended otherwise
	stopped chan struct{}
	ended   chan struct{}
}

// superviseConsumer runs TestHelperPoisonBudget on queue, again and again.
func superviseConsumer(t *testing.T, url, queue, ledgerPath string) *supervisor {
	s := &supervisor{stopped: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		for i := 0; ; i++ {
			out := filepath.Join(t.TempDir(), fmt.Sprintf("consumer-%d.out", i))
			c, err := startPoisonBudgetConsumer(url, queue, ledgerPath, out)
			if err != nil {
				s.mu.Lock()
				s.other = append(s.other, err.Error())
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.cur = c
			s.mu.Unlock()
			var err2 error
			select {
			case err2 = <-c.done:
			case <-s.stopped:
				_ = c.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case err2 = <-c.done:
				case <-time.After(20 * time.Second):
					_ = c.cmd.Process.Kill()
					err2 = <-c.done
				}
			}
			s.mu.Lock()
			var ee *exec.ExitError
			switch {
			case s.done:
				if err2 != nil {
					b, _ := os.ReadFile(out)
					s.other = append(s.other, fmt.Sprintf("the last consumer did not stop cleanly on SIGTERM: %v\n%s", err2, tail(string(b), 40)))
				}
			case errors.As(err2, &ee) && ee.ExitCode() == poisonExit:
				s.crashes++
			default:
				b, _ := os.ReadFile(out)
				s.other = append(s.other, fmt.Sprintf("consumer %d ended: %v\n%s", c.cmd.Process.Pid, err2, tail(string(b), 30)))
			}
			done := s.done
			s.mu.Unlock()
			if done {
				return
			}
		}
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the supervisor and its consumer (SIGTERM) and returns how
// many consumers died on the poison. It may be called more than once.
func (s *supervisor) stop(t *testing.T) int {
	t.Helper()
	s.mu.Lock()
	if !s.done {
		s.done = true
		close(s.stopped)
	}
	s.mu.Unlock()
	<-s.ended
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.other {
		t.Errorf("poison-budget consumer: %s", o)
	}
	s.other = nil
	return s.crashes
}

// startPoisonBudgetConsumer starts TestHelperPoisonBudget in a child
// process, its output in out.
func startPoisonBudgetConsumer(url, queue, ledgerPath, out string) (*child, error) {
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPoisonBudget$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envPoisonBudgetChild+"="+queue, envURL+"="+url, envLedger+"="+ledgerPath)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan error, 1), out: out}
	go func() { c.done <- cmd.Wait() }()
	return c, nil
}

// TestHelperPoisonBudget is not a test: it is the consumer process of
// TestFaultPoisonBudget, and returns at once unless started as one. Every
// delivery writes "seen <id> <x-delivery-count>" to the ledger; a poison
// then makes the process exit with poisonExit after 150 ms (it takes a
// moment to die, time for the prefetch to arrive), and a healthy message
// takes 200 ms of work, is written "accept <id>" and accepted.
func TestHelperPoisonBudget(t *testing.T) {
	q := os.Getenv(envPoisonBudgetChild)
	if q == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	tr := dial(t, os.Getenv(envURL), log)
	f, err := os.OpenFile(os.Getenv(envLedger), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	write := func(line string) error { // one write per line: an exit never leaves half a line
		mu.Lock()
		defer mu.Unlock()
		_, err := f.WriteString(line + "\n")
		return err
	}
	mux := acemq.NewMux()
	mux.HandleFunc(q, func(ctx context.Context, m *acemq.Message) ack.Ack {
		if err := write(fmt.Sprintf("seen %s %d", m.ID(), m.Envelope().DeliveryCount)); err != nil {
			return ack.Retry(err)
		}
		var j quorumJob
		if json.Unmarshal(m.Body(), &j) == nil && j.Poison {
			time.Sleep(150 * time.Millisecond)
			os.Exit(poisonExit)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ack.Retry(ctx.Err())
		}
		if err := write("accept " + m.ID()); err != nil {
			return ack.Retry(err)
		}
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: testPolicy(), Logger: log,
		Queues: map[string]acemq.QueueConfig{q: poisonBudgetConfig()}}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// readSeen reads the deliveries the consumers recorded: by id, the
// x-delivery-count of each, in order.
func readSeen(t *testing.T, path string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	eachRecord(t, path, "seen ", func(rest string) {
		i := strings.LastIndexByte(rest, ' ')
		if i < 0 {
			return
		}
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			t.Fatalf("ledger line %q", "seen "+rest)
		}
		out[rest[:i]] = append(out[rest[:i]], n)
	})
	return out
}
