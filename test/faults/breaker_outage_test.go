package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// Environment of a TestHelperBreakerConsumer process.
const (
	envDependency = "ACEMQ_FAULTS_DEPENDENCY" // the file that, while it exists, says the dependency is down
)

// errDependencyDown is what a handler answers while the dependency is down.
var errDependencyDown = errors.New("the dependency is not answering")

// outagePolicy is the ladder of the breaker scenario: eight attempts, every
// wait in the process (50 ms), so that a message whose handler meets the
// dependency down is dead-lettered after its eighth failure unless
// something stops consuming: each failure publishes a copy back to the
// queue, behind the messages already there.
func outagePolicy() retry.Policy {
	return retry.Fixed(8, 50*time.Millisecond).WithJitter(0).WithBrokerWaitThreshold(time.Hour)
}

// outageBreaker trips on a small window (two failures in the last four
// answers) and probes a second later.
func outageBreaker() *acemq.Breaker {
	return &acemq.Breaker{Window: 4, MinOutcomes: 4, CoolDown: time.Second}
}

// outageJobs are n jobs: one in twenty rejected by its handler (the
// message's own fault: dead-lettered at once, outage or not), one in thirty
// parked, the others accepted once the dependency answers.
func outageJobs(prefix string, n int) []job {
	out := make([]job, n)
	for i := range out {
		j := job{ID: fmt.Sprintf("%s-%04d", prefix, i)}
		switch {
		case i%20 == 7:
			j.Reject = true
		case i%30 == 11:
			j.Park = true
		}
		out[i] = j
	}
	return out
}

// TestFaultBreakerOutage: three consumer processes (this test binary
// again, in TestHelperBreakerConsumer) serve one queue with an in-process
// retry ladder; their handlers call a dependency (a flag file the test
// controls). With a breaker on the queue, the dependency goes down under a
// steady arrival; while it is down one consumer is killed with SIGKILL (a
// new one started in its place, as a supervisor would) and the broker is
// restarted (stop_app, start_app); the dependency stays down a while
// longer once the consumers are back, and then answers again. Every id is
// accounted for, lost=0, and the .dlq holds only the messages rejected for
// their own reason: the outage dead-letters nothing. The second subtest
// runs the same outage without the breaker and reports what the ladder
// dead-letters then (not asserted: how much it burns depends on the
// machine's pace), for the comparison.
func TestFaultBreakerOutage(t *testing.T) {
	var with, without outageRun
	t.Run("breaker", func(t *testing.T) { with = breakerOutage(t, "breaker-outage", true) })
	t.Run("ladder", func(t *testing.T) { without = breakerOutage(t, "breaker-outage-ladder", false) })
	t.Logf("the same outage: with the breaker %s; without it %s", with, without)
}

// outageRun is what one run of the scenario counted.
type outageRun struct {
	done bool
	r    result
	// outageDead is how many the outage dead-lettered; failures how many
	// handler calls met the dependency down, and mostFailed the most of
	// them one message took.
	outageDead, failures, mostFailed int
	opened, closed                   int // the breakers' changes
	took                             time.Duration
}

func (o outageRun) String() string {
	if !o.done {
		return "(did not finish)"
	}
	return fmt.Sprintf("%d of %d dead-lettered for the outage (%d in all), %d failed handler calls (at most %d for one message), the breakers opened %d times and closed %d, in %s",
		o.outageDead, o.r.published, o.r.deadlettered, o.failures, o.mostFailed, o.opened, o.closed, o.took.Round(100*time.Millisecond))
}

// The outage's shape: the dependency goes down after breakerUpFirst
// acceptances; a consumer is killed once the handlers have failed
// breakerFailsFirst times, and then the broker restarted; once the
// handlers have failed breakerFailsAfter more times on the restarted
// broker, the dependency stays down for breakerHold more.
const (
	breakerMessages   = 200
	breakerUpFirst    = 30
	breakerFailsFirst = 10
	breakerFailsAfter = 3
	breakerHold       = 3 * time.Second
)

// breakerOutage runs the scenario on a vhost of the private node, with
// the queue's breaker or without, and returns what it counted.
func breakerOutage(t *testing.T, name string, breaker bool) outageRun {
	n := node.Get(t)
	n.Acquire(t)
	began := time.Now()
	phase := func(format string, args ...any) {
		t.Logf("%s: at %s: "+format, append([]any{name, time.Since(began).Round(100 * time.Millisecond)}, args...)...)
	}
	url, _ := n.FreshVhost(t)
	log := testLogger(t)
	q := "faults." + name
	pol := outagePolicy()
	pubTr := dial(t, url, log)
	if err := pubTr.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, dep := filepath.Join(dir, "ledger"), filepath.Join(dir, "dependency-down")
	failed := func() (calls int, attempts map[string][]string) { // the attempts that failed, by id
		attempts = map[string][]string{}
		eachRecord(t, path, "fail ", func(rest string) {
			calls++
			id, attempt, _ := strings.Cut(rest, " ")
			attempts[id] = append(attempts[id], attempt)
		})
		return calls, attempts
	}
	failures := func() int { n, _ := failed(); return n }

	var consumers, started []*child // running; every one started
	for range 3 {
		consumers = append(consumers, startBreakerConsumer(t, url, q, path, dep, breaker))
	}
	started = append(started, consumers...)
	polltest.Within(t, 60*time.Second, "three consumers on "+q, func() bool {
		info, err := pubTr.Inspect(context.Background(), q)
		return err == nil && info.Consumers == 3
	})
	phase("three consumers on %s", q)
	js := outageJobs(name, breakerMessages)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 2, 40*time.Millisecond, stats) }()

	polltest.Within(t, 60*time.Second, fmt.Sprintf("%d acceptances with the dependency up", breakerUpFirst), func() bool {
		return len(readLedger(t, path)) >= breakerUpFirst
	})
	if err := os.WriteFile(dep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	phase("the dependency is down, at %d acceptances", len(readLedger(t, path)))
	polltest.Within(t, 60*time.Second, fmt.Sprintf("%d failures", breakerFailsFirst), func() bool { return failures() >= breakerFailsFirst })
	consumers[0].kill(t, syscall.SIGKILL)
	phase("consumer %d killed with SIGKILL at %d failures; another started in its place", consumers[0].cmd.Process.Pid, failures())
	consumers[0] = startBreakerConsumer(t, url, q, path, dep, breaker)
	started = append(started, consumers[0])
	n.StopApp(t)
	time.Sleep(time.Second)
	n.StartApp(t)
	back := failures()
	phase("the broker restarted, at %d failures", back)
	polltest.Within(t, 60*time.Second, "the handlers failing again after the broker restart", func() bool {
		return failures() >= back+breakerFailsAfter
	})
	phase("the handlers fail again on the restarted broker")
	time.Sleep(breakerHold) // the fault's length, not a wait for a result
	if err := os.Remove(dep); err != nil {
		t.Fatal(err)
	}
	atRecovery := failures()
	phase("the dependency answers again, after %d failures", atRecovery)

	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	dlq := &reasons{by: map[string][]string{}}
	if !polltest.Until(120*time.Second, func() bool {
		dlq.poll(sk)
		accepted := readLedger(t, path)
		sk.mu.Lock()
		defer sk.mu.Unlock()
		for _, j := range sent {
			if accepted[j.ID]+sk.dlq[j.ID]+sk.parked[j.ID] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("%s: not every message reached its end within 120s of the recovery", name)
	}
	phase("every message reached its end")
	for _, c := range consumers {
		c.kill(t, syscall.SIGTERM)
	}
	dlq.poll(sk)
	tl := sk.collect(t, name, sent, readLedger(t, path), pol)

	// What the outage dead-lettered: the .dlq's messages that were not
	// rejected for their own reason. Each must have died of the dependency.
	var outageDead []string
	index := map[string]int{}
	for i, j := range tl.published {
		index[j.ID] = i
	}
	for id := range tl.dlq {
		i, ok := index[id]
		if !ok || tl.published[i].Reject {
			continue
		}
		outageDead = append(outageDead, id)
		if rs := dlq.by[id]; len(rs) == 0 || !strings.Contains(rs[0], errDependencyDown.Error()) {
			t.Errorf("%s: %s is in the .dlq with the reasons %q, not for the dependency", name, id, rs)
		}
		if !breaker {
			tl.published[i].Always = true // the ladder's end for a message the outage outlasted
		}
	}
	run := outageRun{done: true, outageDead: len(outageDead), took: time.Since(began)}
	var attempts map[string][]string
	run.failures, attempts = failed()
	most := ""
	for id, as := range attempts {
		if len(as) > run.mostFailed {
			run.mostFailed, most = len(as), id
		}
	}
	for _, c := range started {
		out, _ := os.ReadFile(c.out)
		run.opened += strings.Count(string(out), "breaker opened")
		run.closed += strings.Count(string(out), "breaker closed")
	}
	run.r = tl.report(t)
	t.Logf("%s: %s", name, run)
	if most != "" {
		t.Logf("%s: the message that failed most, %s, failed at the attempts %v (accepted %d, dlq %d)", name, most, attempts[most], tl.accepted[most], tl.dlq[most])
	}
	if breaker {
		if len(outageDead) != 0 {
			t.Errorf("%s: %d messages dead-lettered for the outage with the breaker: %v", name, len(outageDead), head(outageDead))
		}
		if run.opened == 0 {
			t.Errorf("%s: no consumer's breaker opened", name)
		}
	}
	return run
}

// startBreakerConsumer runs a consumer process (TestHelperConsumer, mode
// "breaker" or "ladder": runBreakerConsumer) on queue, with the breaker or
// without.
func startBreakerConsumer(t *testing.T, url, queue, ledgerPath, dependency string, breaker bool) *child {
	t.Helper()
	mode := "ladder"
	if breaker {
		mode = "breaker"
	}
	return startConsumer(t, mode, url, queue, envLedger+"="+ledgerPath, envDependency+"="+dependency)
}

// runBreakerConsumer is the consumer process of TestFaultBreakerOutage
// (TestHelperConsumer's modes breaker and ladder). Its handler follows each message's script (ledgerHandler), except that a
// message whose script is to be accepted fails with errDependencyDown,
// written "fail <id> <attempt>" to the ledger, while the dependency file exists.
func runBreakerConsumer(t *testing.T, ctx context.Context, breaker bool) {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	tr := dial(t, os.Getenv(envURL), log)
	path := os.Getenv(envLedger)
	record, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer record.Close()
	var mu sync.Mutex
	dependency := os.Getenv(envDependency)
	scripted := ledgerHandler(t, path)
	q := os.Getenv(envQueue)
	mux := acemq.NewMux()
	mux.Handle(q, acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		if j.Reject || j.Park {
			return scripted.ServeMessage(ctx, m)
		}
		if _, err := os.Stat(dependency); err == nil {
			mu.Lock() // one write per line: a kill never leaves half a line
			_, err := fmt.Fprintf(record, "fail %s %d\n", m.ID(), m.Attempt())
			mu.Unlock()
			if err != nil {
				return ack.Retry(err)
			}
			return ack.Retry(errDependencyDown)
		}
		return scripted.ServeMessage(ctx, m)
	}))
	cfg := acemq.QueueConfig{Concurrency: 4, Prefetch: 8}
	if breaker {
		cfg.Breaker = outageBreaker()
	}
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: outagePolicy(), Logger: log, PublishTimeout: 5 * time.Second,
		Queues: map[string]acemq.QueueConfig{q: cfg}}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
