package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// netsplitReplayGroup is how many dead letters of the group replayed the
// scenario seeds, and netsplitReplayOthers how many of another group,
// which the replay must leave where they are.
const (
	netsplitReplayGroup  = 300
	netsplitReplayOthers = 40
)

// TestFaultNetsplitReplay: an operator runs `acemq triage Q.dlq --replay
// GROUP` (the CLI binary, built from this module) connected to node 1 of
// the three-node cluster that can split, where the work queue Q (a quorum
// queue) is led and Q.dlq (classic) lives; servers on nodes 0 and 2 handle
// what comes back. Q.dlq holds 300 dead letters of one group and 40 of
// another. While the move is under way node 1 is cut off from the other
// two, both ways, for 20 s: the copy in flight gets no confirm (Q's leader
// has lost its majority), pause_minority then pauses node 1 and closes the
// CLI's connection. After the heal the operator runs the same command
// again, if the first stopped with an error. Every id is accounted for
// (the FAULT line): the group handled from Q, the other group still in
// Q.dlq, none lost, duplicates counted and explained by the copy the first
// run named as in flight. What the first run printed and its exit status
// are logged, and must name the message in flight and where its original
// is.
func TestFaultNetsplitReplay(t *testing.T) {
	t.Parallel()
	const name = "netsplit-replay"
	cli := buildCLI(t)
	s := startNetsplit(t, name)
	nodes := s.Nodes
	const victim = netsplitVictim
	log := testLogger(t)
	q := "faults." + name
	dlq := acemq.DeadLetterQueue(q)
	quorum := map[string]any{"x-queue-type": "quorum"}
	pol := retry.None()

	// Through node 1: Q, which it then leads, and Q.dlq and Q.parked,
	// classic queues that live on it.
	vtr := dial(t, nodes[victim].URL, log, rabbitmq.WithConnectionName("netsplit replay seeding on node 1"))
	if err := vtr.Declare(context.Background(), acemq.Topology(q, pol, quorum)); err != nil {
		t.Fatal(err)
	}
	group := triage.ID(triage.Key(replayReason(0)))
	var js []job
	created := time.Now().Add(-time.Hour)
	for i := range netsplitReplayGroup + netsplitReplayOthers {
		j, reason := job{ID: fmt.Sprintf("%s-%04d", name, i)}, replayReason(i)
		if i >= netsplitReplayGroup {
			// Not replayed: its script would reject it, were it delivered.
			j, reason = job{ID: fmt.Sprintf("%s-other-%04d", name, i), Reject: true}, fmt.Sprintf("the handler rejected it: order %d has no customer", i)
		}
		js = append(js, j)
		if _, err := vtr.Publish(context.Background(), transport.Publishing{RoutingKey: dlq, Mandatory: true,
			Headers: map[string]any{acemq.HeaderID: j.ID, acemq.HeaderAttempt: 3, acemq.HeaderError: reason,
				acemq.HeaderCreated: created.UnixMilli(), acemq.HeaderRoutingKey: q, acemq.HeaderExchange: ""},
			Properties: transport.Properties{DeliveryMode: 2, ContentType: "application/json"}, Body: body(j)}); err != nil {
			t.Fatalf("seed %s: %v", j.ID, err)
		}
	}
	moving := js[:netsplitReplayGroup]
	polltest.Within(t, 30*time.Second, fmt.Sprintf("%d dead letters ready in %s", len(js), dlq), func() bool {
		return depth(nodes[0].URL, dlq) == len(js)
	})

	l := newLedger()
	var runs []*running
	for _, i := range []int{0, 2} {
		tr := dial(t, nodes[i].URL, log, rabbitmq.WithURLs(nodes[2-i].URL, nodes[victim].URL),
			rabbitmq.WithConnectionName(fmt.Sprintf("netsplit replay server on node %d", i)))
		runs = append(runs, serve(t, tr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second,
			Queues: map[string]acemq.QueueConfig{q: {Args: quorum}}}, l.handler(2*time.Millisecond), log))
	}
	before := leaders(t, nodes[0])
	if before[q] != nodes[victim].Name {
		t.Fatalf("%s: the leader of %s is %q, want node %d, %s", name, q, before[q], victim, nodes[victim].Name)
	}

	t.Logf("%s: before the replay, as node 0 lists them:\n%s", name, quorumMembers(t, nodes[0], []string{q}))

	// The operator's first run, through node 1 only.
	args := []string{"triage", dlq, "--replay", group, "--url", nodes[victim].URL,
		"--management", "http://127.0.0.1:1", "--progress", "50ms"}
	first := startCLI(t, cli, args...)
	// The cut comes once the CLI says it moved 20: the move is then on
	// its way, at a few hundred a second, the rest still in the .dlq.
	polltest.Within(t, 60*time.Second, "the replay under way: 20 of the group moved, as its progress says", func() bool {
		return first.moved() >= 20 || first.ended()
	})
	if first.ended() {
		t.Fatalf("%s: the replay ended before the cut (make the group larger): %s", name, first)
	}
	movedAtCut, handledAtCut := -1, 0
	span := splitAndHeal(t, s, name, victim, false, []string{q}, func() string {
		if movedAtCut < 0 { // at the cut
			movedAtCut, handledAtCut = first.moved(), len(l.acceptedCopy())
		}
		state := "the first replay still running"
		if first.ended() {
			state = "the first replay ended (exit " + fmt.Sprint(first.code) + ")"
		}
		return fmt.Sprintf("%d of the group handled, %s", len(l.acceptedCopy()), state)
	})
	t.Logf("%s: at the cut the first run said it had moved %d of the %d, and %d had been handled", name, movedAtCut, len(moving), handledAtCut)
	if !first.wait(120 * time.Second) {
		t.Fatalf("%s: the first replay had not ended 2 minutes after the heal: %s", name, first)
	}
	t.Logf("%s: the operator's first run ended %s after the cut: %s", name, first.endedAt.Sub(span.cut).Round(time.Millisecond), first)
	said := first.said()
	if !said.ok {
		t.Fatalf("%s: the first replay did not say how far it got: %s", name, first)
	}
	inFlight := ""
	if first.code == 0 {
		// A transport that carried the move across the pause and the heal
		// would do this; the counts are checked below all the same.
		t.Logf("%s: the first run, cut off after %d of %d, completed", name, movedAtCut, len(moving))
	} else {
		inFlight = judgeReplayFailure(t, name, first, dlq, q)
	}
	// What the first run said it moved is what came back: every copy it
	// counted is handled, and at most the one in flight besides.
	if !polltest.Until(60*time.Second, func() bool { return len(l.acceptedCopy()) >= said.moved }) {
		t.Errorf("%s: the first run said it replayed %d, but only %d came back to %s", name, said.moved, len(l.acceptedCopy()), q)
	}
	handledFirst := l.acceptedCopy()
	if n := len(handledFirst); n > said.moved+1 || n > said.moved && handledFirst[inFlight] == 0 {
		t.Errorf("%s: the first run said it replayed %d (and %q was in flight), but %d came back to %s", name, said.moved, inFlight, n, q)
	}
	t.Logf("%s: per id after the first run: %d handled from %s (%d it counted, the one in flight %s), %d of the group still in %s",
		name, len(handledFirst), q, said.moved, map[bool]string{true: "among them", false: "not"}[handledFirst[inFlight] > 0], said.left, dlq)
	if first.code != 0 {
		second := startCLI(t, cli, args...)
		if !second.wait(120 * time.Second) {
			t.Fatalf("%s: the second replay had not ended within 2 minutes: %s", name, second)
		}
		t.Logf("%s: the operator's second run: %s", name, second)
		said2 := second.said()
		if second.code != 0 || !said2.ok {
			t.Errorf("%s: the replay after the heal failed too: %s", name, second)
		}
		if said2.before != said.left+netsplitReplayOthers {
			t.Errorf("%s: the first run said %d of the group were left, the second found %d ready (%d of them the other group)", name, said.left, said2.before, netsplitReplayOthers)
		}
		if said.after != said2.before {
			// cmd/acemq/triage_read.go, settle: the count is 0 when the
			// broker cannot be asked (the connection went with the node).
			t.Logf("%s: operator's view: the first run printed %d ready after it, where the broker held %d: it could not ask the broker (its node paused) and printed 0 as the count",
				name, said.after, said2.before)
		}
	}

	sk := newSink(nodes[0].URL, q)
	if !polltest.Until(90*time.Second, func() bool { return l.allAccepted(moving) }) {
		_, queues := holding(t, nodes[0], []string{q})
		t.Errorf("%s: not every one of the group was handled within 90 s of the last replay; the queues holding messages: %s", name, queues)
	}
	after := leaders(t, nodes[0])
	t.Logf("%s: after the heal, %s leads %s", name, after[q], q)
	for _, r := range runs {
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	r := sk.collect(t, name, js, l.acceptedCopy(), pol).report(t)
	explainReplayDuplicates(t, name, r, inFlight)
}

// replayReason is the reason of the i-th dead letter of the group: one
// group once triage takes the numbers out.
func replayReason(i int) string {
	return fmt.Sprintf("exhausted 3 attempts: POST https://wh.internal/reserve/%d: HTTP 503", 8000+i)
}

// cliRun is a run of the acemq command in the background.
type cliRun struct {
	args           []string
	done           chan struct{}
	code           int
	stdout, stderr lockedBuffer
	endedAt        time.Time
}

// startCLI runs the command at bin with args, its output kept; it is
// killed if still running at the end of t.
func startCLI(t testing.TB, bin string, args ...string) *cliRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "ACEMQ_MANAGEMENT_URL=")
	r := &cliRun{args: args, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start acemq %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		defer close(r.done)
		err := cmd.Wait()
		r.endedAt = time.Now()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
		default:
			r.code = -1
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *cliRun) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the run to end.
func (r *cliRun) wait(d time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

// String is the run's exit status and output, once it ended.
func (r *cliRun) String() string {
	if !r.ended() {
		return "still running"
	}
	return fmt.Sprintf("exit status %d; stdout:\n%s\nstderr (progress lines left out):\n%s", r.code,
		strings.TrimSpace(r.stdout.String()), strings.Join(withoutProgress(r.stderr.String()), "\n"))
}

// withoutProgress is out's lines but the progress ones ("Q.dlq -> Q:
// moved N of M ...", "Q.dlq: read N of M ...").
func withoutProgress(out string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r", "\n")), "\n") {
		if line != "" && !progressLine.MatchString(line) {
			lines = append(lines, line)
		}
	}
	return lines
}

// progressLine is a line of a move's or a read's progress, the count in
// the move's first group.
var progressLine = regexp.MustCompile(`^\S+ -> \S+: moved (\d+) of |^\S+: read \d+ of `)

// moved is the last count of moved messages the run's progress said.
func (r *cliRun) moved() int {
	n := 0
	for _, line := range strings.Split(strings.ReplaceAll(r.stderr.String(), "\r", "\n"), "\n") {
		if m := progressLine.FindStringSubmatch(line); m != nil && m[1] != "" {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}

// replaySaid is what a triage --replay run printed on stdout: how many it
// replayed and left, and the source's count before and after.
type replaySaid struct {
	ok                         bool // both lines found
	moved, left, before, after int
}

var (
	replayCounts = regexp.MustCompile(`(?m): (\d+) replayed to \S+, (\d+) left$`)
	replayReady  = regexp.MustCompile(`(?m): (\d+) messages? ready before, (\d+) after$`)
)

func (r *cliRun) said() replaySaid {
	out := r.stdout.String()
	c, d := replayCounts.FindStringSubmatch(out), replayReady.FindStringSubmatch(out)
	if c == nil || d == nil {
		return replaySaid{}
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return replaySaid{ok: true, moved: n(c[1]), left: n(c[2]), before: n(d[1]), after: n(d[2])}
}

// replayInFlight finds the id of the message a failed replay names.
var replayInFlight = regexp.MustCompile(`replay of message (\S+) from`)

// judgeReplayFailure checks what a replay that failed across the cut told
// the operator: the message in flight, and that its original is still in
// the .dlq. It returns that message's id.
func judgeReplayFailure(t testing.TB, name string, r *cliRun, dlq, q string) string {
	t.Helper()
	errOut := strings.Join(withoutProgress(r.stderr.String()), "\n")
	m := replayInFlight.FindStringSubmatch(errOut)
	if r.code != 1 || m == nil || !strings.Contains(errOut, fmt.Sprintf("the original is still in %q", dlq)) {
		t.Errorf("%s: the failed replay did not say which message was in flight and where its original is (exit status %d):\n%s", name, r.code, errOut)
		return ""
	}
	return m[1]
}

// explainReplayDuplicates says where each duplicate of a replay across the
// cut came from: the copy in flight when the first run stopped, which the
// broker took after all while its original stayed in the .dlq and was
// moved again by the second run. Any other is reported.
func explainReplayDuplicates(t testing.TB, name string, r result, inFlight string) {
	t.Helper()
	for _, d := range r.duplicateIDs {
		id, _, _ := strings.Cut(d, " ")
		if id == inFlight {
			t.Logf("%s: duplicate %s: the copy in flight when the first run stopped, which the first run said may have arrived; its original stayed in the .dlq and the second run moved it again", name, d)
			continue
		}
		t.Logf("%s: duplicate %s: not the copy the first run named as in flight", name, d)
	}
	if n := len(r.duplicateIDs); n > 2 {
		t.Errorf("%s: %d ids duplicated; a replay moves one message at a time, so a cut explains at most the copy in flight and the acknowledgement in flight", name, n)
	}
}
