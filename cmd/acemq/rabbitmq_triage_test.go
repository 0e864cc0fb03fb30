package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// declareFamily declares q with its .dlq and .parked, as a consumer does.
func declareFamily(t *testing.T, tr transport.Transport, u, q string, extra ...string) {
	t.Helper()
	if err := tr.Declare(context.Background(), acemq.Topology(q, retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueues(t, u, append([]string{q, q + ".dlq", q + ".parked"}, extra...)...) })
}

// drainIDs takes every message of q, acknowledging it, and returns their
// ids.
func drainIDs(t *testing.T, tr transport.Transport, q string) []string {
	t.Helper()
	var ids []string
	for {
		d, ok, err := tr.Get(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ids
		}
		ids = append(ids, acemq.EnvelopeOf(d).ID)
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRabbitMQTriage: a .dlq with a realistic mix of reasons, some
// dead-lettered by RabbitMQ itself, is grouped exactly; a group replayed,
// one archived to a file and one to a queue, with exact counts.
func TestRabbitMQTriage(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	ctx := context.Background()
	src := q + ".src" // a queue of another service's that dead-letters into q.dlq
	declareFamily(t, tr, u, q, src, q+".archive")
	err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: src, Durable: true,
		Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q + ".dlq"}}}})
	if err != nil {
		t.Fatal(err)
	}
	reasons, want := mixedReasons()
	created := time.Now().Add(-2 * time.Hour)
	for i, r := range reasons {
		seedDeadLetter(t, tr, q, fmt.Sprintf("m-%d", i+1), r, created)
	}
	for i := range 3 { // rejected without requeue: RabbitMQ writes x-death
		if _, err := tr.Publish(ctx, transport.Publishing{RoutingKey: src, Mandatory: true,
			Headers: map[string]any{acemq.HeaderID: fmt.Sprintf("b-%d", i)}, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, tr, src, 3)
	for range 3 {
		d, ok, err := tr.Get(ctx, src)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		_ = d.Reject(false)
	}
	total := len(reasons) + 3
	waitDepth(t, tr, q+".dlq", total)

	code, out, errOut := cli(t, dialRabbitMQ, "triage", q+".dlq", "--url", u, "--json")
	var got triageOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("triage: %d %v\n%s%s", code, err, out, errOut)
	}
	if got.Read != total || len(got.Groups) != len(want)+1 {
		t.Errorf("read %d in %d groups, want %d in %d", got.Read, len(got.Groups), total, len(want)+1)
	}
	for _, g := range got.Groups {
		switch {
		case g.Kind == "broker":
			if g.Count != 3 || g.FirstDeadLettered == nil || !strings.Contains(g.SampleReason, src) || !strings.HasSuffix(g.Key, "(rejected)") {
				t.Errorf("broker group: %+v", g)
			}
		case want[g.Key] != g.Count:
			t.Errorf("group %q: %d, want %d", g.Key, g.Count, want[g.Key])
		}
	}
	waitDepth(t, tr, q+".dlq", total) // nothing consumed

	replayed := triage.ID("exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503")
	code, out, errOut = cli(t, dialRabbitMQ, "triage", q+".dlq", "--url", u, "--replay", replayed)
	wantOut := fmt.Sprintf("%s.dlq: group %s, 7 messages when read: 7 replayed to %s, 0 left\n%s.dlq: 21 messages ready before, 14 after\n", q, replayed, q, q)
	if code != 0 || out != wantOut {
		t.Fatalf("replay: %d\n%s\nwant\n%s%s", code, out, wantOut, errOut)
	}
	waitDepth(t, tr, q, 7)
	waitDepth(t, tr, q+".dlq", 14)

	file := filepath.Join(t.TempDir(), "archive.jsonl")
	purged := triage.ID(`the handler rejected it: no such customer "<q>"`)
	code, out, errOut = cli(t, dialRabbitMQ, "triage", q+".dlq", "--url", u, "--discard", purged, "--why", "GDPR purge", "--operator", "alice", "--to-file", file)
	if code != 0 || !strings.Contains(out, ": 4 archived in "+file+", 0 left\n") || !strings.Contains(out, "14 messages ready before, 10 after") {
		t.Fatalf("discard to file: %d\n%s%s", code, out, errOut)
	}
	waitDepth(t, tr, q+".dlq", 10)
	if lines := archivedIDs(t, file); len(lines) != 4 {
		t.Errorf("archived %v", lines)
	}

	broken := triage.ID("could not be decoded: invalid character '<q>' looking for beginning of value")
	code, out, errOut = cli(t, dialRabbitMQ, "triage", q+".dlq", "--url", u, "--discard", broken, "--why", "v2 producer bug", "--to-queue", q+".archive")
	if code != 0 || !strings.Contains(out, ": 3 archived in "+q+".archive, 0 left\n") || !strings.Contains(out, "10 messages ready before, 7 after") {
		t.Fatalf("discard to queue: %d\n%s%s", code, out, errOut)
	}
	waitDepth(t, tr, q+".dlq", 7)
	waitDepth(t, tr, q+".archive", 3)
	d, ok, err := tr.Get(ctx, q+".archive")
	if err != nil || !ok || d.Headers[HeaderArchivedWhy] != "v2 producer bug" || d.Headers[HeaderArchivedFrom] != q+".dlq" || d.Headers[acemq.HeaderError] == nil {
		t.Errorf("archived: %v %v %v", d.Headers, ok, err)
	}
	if ok {
		_ = d.Reject(true)
	}
}

// archivedIDs reads the ids of an archive file's lines.
func archivedIDs(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line archived
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		id, _ := line.Headers[acemq.HeaderID].(string)
		ids = append(ids, id)
	}
	return ids
}

// binary builds the acemq command, for the tests that run it as a
// process of its own to send it signals.
func binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "acemq")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// fillDLQ puts n dead letters with ids i-0000... into q.dlq, 16 at a time.
func fillDLQ(t *testing.T, tr *rabbitmq.Transport, q string, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := fmt.Sprintf("i-%04d", i)
				_, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: q + ".dlq", Mandatory: true,
					Headers: map[string]any{acemq.HeaderID: id, acemq.HeaderAttempt: 5, acemq.HeaderError: "exhausted 5 attempts: warehouse timeout after " + strconv.Itoa(i) + "ms"},
					Body:    []byte(id)})
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	waitDepth(t, tr, q+".dlq", n)
	return ids
}

var movedSoFar = regexp.MustCompile(`moved (\d+)`)

// TestRabbitMQInterrupted: a replay (and a discard) of 2000 messages,
// run as its own process and sent SIGINT or SIGHUP midway, stops with
// "interrupted: moved N, left M": every message is in exactly one place,
// none twice.
func TestRabbitMQInterrupted(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	bin := binary(t)
	const n = 2000
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		args func(q, file string) []string
	}{
		{"replay SIGINT", syscall.SIGINT, func(q, _ string) []string { return []string{"replay", "--queue", q} }},
		{"replay SIGHUP", syscall.SIGHUP, func(q, _ string) []string { return []string{"replay", "--queue", q} }},
		{"triage replay SIGHUP", syscall.SIGHUP, func(q, _ string) []string {
			return []string{"triage", q + ".dlq", "--replay", triage.ID("exhausted <n> attempts: warehouse timeout after <n>ms")}
		}},
		{"triage discard SIGINT", syscall.SIGINT, func(q, file string) []string {
			return []string{"triage", q + ".dlq", "--discard", triage.ID("exhausted <n> attempts: warehouse timeout after <n>ms"), "--why", "test", "--to-file", file}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := rabbitQueue()
			tr := rabbitTransport(t, u)
			declareFamily(t, tr, u, q)
			ids := fillDLQ(t, tr, q, n)
			file := filepath.Join(t.TempDir(), "archive.jsonl")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(c.args(q, file), "--url", u, "--progress", "50ms")...)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout strings.Builder
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var errOut strings.Builder
			sent := false
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				errOut.WriteString(line + "\n")
				if m := movedSoFar.FindStringSubmatch(line); !sent && m != nil {
					if moved, _ := strconv.Atoi(m[1]); moved >= 100 {
						_ = cmd.Process.Signal(c.sig)
						sent = true
					}
				}
			}
			_, _ = io.Copy(io.Discard, stderr)
			err = cmd.Wait()
			if !sent {
				t.Fatalf("finished before the signal: %v\n%s%s", err, stdout.String(), errOut.String())
			}
			m := regexp.MustCompile(`interrupted: moved (\d+), left (\d+)\n`).FindStringSubmatch(errOut.String())
			if cmd.ProcessState.ExitCode() != 1 || m == nil {
				t.Fatalf("exit %d (%v)\n%s%s", cmd.ProcessState.ExitCode(), err, stdout.String(), errOut.String())
			}
			moved, _ := strconv.Atoi(m[1])
			left, _ := strconv.Atoi(m[2])
			if moved < 100 || moved >= n || moved+left != n {
				t.Errorf("moved %d, left %d, of %d", moved, left, n)
			}
			var there []string
			if strings.Contains(c.name, "discard") {
				there = archivedIDs(t, file)
			} else {
				waitDepth(t, tr, q, moved)
				there = drainIDs(t, tr, q)
			}
			waitDepth(t, tr, q+".dlq", left)
			stayed := drainIDs(t, tr, q+".dlq")
			seen := map[string]int{}
			for _, id := range append(there, stayed...) {
				seen[id]++
			}
			for id := range ids {
				if seen[id] != 1 {
					t.Errorf("%s is there %d times", id, seen[id])
				}
			}
			if len(there) != moved || len(stayed) != left || len(seen) != n {
				t.Errorf("moved %d (said %d), left %d (said %d), %d distinct of %d", len(there), moved, len(stayed), left, len(seen), n)
			}
			t.Logf("%s: %s", c.name, m[0])
		})
	}
}

// TestRabbitMQTriageDiscardWhileAnotherReaderRequeues is the scenario of
// triage_grew_test.go on RabbitMQ: another connection has got 12 of the
// .dlq's 30 messages when triage --discard starts, and rejects them with
// requeue during the move; the move waits (in the test's hook) until the
// broker counts them ready again, so that the counts are exact.
func TestRabbitMQTriageDiscardWhileAnotherReaderRequeues(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	declareFamily(t, tr, u, q)
	s := newGrewScenario()
	s.seed(t, tr, q)
	dlq := acemq.DeadLetterQueue(q)
	waitDepth(t, tr, dlq, s.total)
	other := rabbitTransport(t, u)
	giveBack := s.hold(t, other, q)
	waitDepth(t, tr, dlq, s.total-s.held)
	file := s.run(t, dialRabbitMQ, u, q, giveBack, func() {
		var info transport.QueueInfo
		var err error
		if !polltest.Until(polltest.Generous, func() bool {
			info, err = tr.Inspect(context.Background(), dlq)
			return err == nil && info.Messages >= s.total // the hook runs before the move takes any
		}) {
			t.Errorf("the other reader's messages are not ready again: %+v %v", info, err)
		}
	})
	s.account(t, "triage-discard-requeued", archivedIDs(t, file), drainIDs(t, tr, dlq))
}
