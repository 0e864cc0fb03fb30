package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dialer connects the command line to a broker, as main does to RabbitMQ.
type dialer func(ctx context.Context, url string) (transport.Transport, error)

// cli runs the command line with args and returns its status and output.
func cli(t *testing.T, dial dialer, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, dial)
	return code, out.String(), errOut.String()
}

func noBroker(context.Context, string) (transport.Transport, error) {
	return nil, errors.New("this command should not need a broker")
}

// memoryBroker is a broker with the topology of queue and dead letters in
// its .dlq, created two hours before the broker's clock reads.
func memoryBroker(t *testing.T, queue string, reasons ...string) (*memory.Broker, dialer) {
	t.Helper()
	b := memory.New()
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	if err := conn.Declare(ctx, acemq.Topology(queue, retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	for i, reason := range reasons {
		seedDeadLetter(t, conn, queue, fmt.Sprintf("m-%d", i+1), reason, b.Clock().Now().Add(-2*time.Hour))
	}
	return b, func(context.Context, string) (transport.Transport, error) { return b.Connect(), nil }
}

func seedDeadLetter(t *testing.T, tr transport.Transport, queue, id, reason string, created time.Time) {
	t.Helper()
	_, err := tr.Publish(context.Background(), transport.Publishing{
		RoutingKey: acemq.DeadLetterQueue(queue), Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: id, acemq.HeaderAttempt: 5, acemq.HeaderError: reason,
			acemq.HeaderCreated: created.UnixMilli(), acemq.HeaderRoutingKey: queue, acemq.HeaderExchange: ""},
		Body: []byte(`{"order":"` + id + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScheduleWorkedExample is the seeds' ladder: waits 10s 20s 40s 80s
// 160s, the last three on rungs named as consumers declare them.
func TestScheduleWorkedExample(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, noBroker, "schedule", "--queue", "shipping.orders", "--attempts", "6", "--initial", "10s", "--max", "10m", "--threshold", "30s")
	want := `shipping.orders: 6 attempts (the first delivery and 5 retries), exponential from 10s up to 10m; waits of 30s or more on rungs in the broker

ATTEMPT  WAIT   SECONDS  WHERE
2        10s    10s      in process (±20% jitter)
3        20s    20s      in process (±20% jitter)
4        40s    40s      rung shipping.orders.retry.40s
5        1m20s  80s      rung shipping.orders.retry.1m20s
6        2m40s  160s     rung shipping.orders.retry.2m40s

waits: 10s 20s 40s 80s 160s
rungs: 40s 80s 160s
`
	if code != 0 || !strings.HasPrefix(out, want) || errOut != "" {
		t.Fatalf("status %d\n%s\nwant\n%s\nstderr %s", code, out, want, errOut)
	}
	for _, d := range []time.Duration{40 * time.Second, 80 * time.Second, 160 * time.Second} {
		if !strings.Contains(out, retry.RungName("shipping.orders", d)+"\n") {
			t.Errorf("rung %s is not named as declared", retry.RungName("shipping.orders", d))
		}
	}
}

func TestScheduleJSON(t *testing.T) {
	t.Parallel()
	code, out, _ := cli(t, noBroker, "schedule", "--json", "--queue", "q", "--attempts", "3", "--initial", "1m", "--fixed", "--give-up-after", "6h")
	var got scheduleOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if len(got.Waits) != 2 || got.Waits[1].Rung != "q.retry.1m" || got.Waits[1].Seconds != 60 || len(got.Rungs) != 1 ||
		got.Rungs[0].Args["x-message-ttl"] != float64(60000) || got.GiveUpAfter != "6h" {
		t.Errorf("%+v", got)
	}
}

// TestScheduleOnDelayQueues: the same ladder with --on-delay-queues spends
// its long waits on the delay queues, jittered, and needs no rung.
func TestScheduleOnDelayQueues(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, noBroker, "schedule", "--queue", "shipping.orders", "--attempts", "6", "--initial", "10s", "--max", "10m", "--threshold", "30s", "--on-delay-queues")
	want := `shipping.orders: 6 attempts (the first delivery and 5 retries), exponential from 10s up to 10m; waits of 30s or more on the delay queues

ATTEMPT  WAIT   SECONDS  WHERE
2        10s    10s      in process (±20% jitter)
3        20s    20s      in process (±20% jitter)
4        40s    40s      delay queues (±20% jitter)
5        1m20s  80s      delay queues (±20% jitter)
6        2m40s  160s     delay queues (±20% jitter)

waits: 10s 20s 40s 80s 160s
rungs: none (the waits of 30s or more are spent on the delay queues acemq.delay.v1.00 to .27)
`
	if code != 0 || !strings.HasPrefix(out, want) || errOut != "" {
		t.Fatalf("status %d\n%s\nwant\n%s\nstderr %s", code, out, want, errOut)
	}
	for _, c := range []struct {
		args   []string
		where  []string
		jitter float64
	}{
		{[]string{"--attempts", "3", "--initial", "1m", "--fixed", "--on-delay-queues"}, []string{"delays", "delays"}, 0},
		{[]string{"--attempts", "3", "--initial", "10s", "--threshold", "20s", "--on-delay-queues"}, []string{"process", "delays"}, 0.2},
		{[]string{"--attempts", "3", "--initial", "1m", "--threshold", "0", "--on-delay-queues"}, []string{"process", "process"}, 0.2},
		{[]string{"--attempts", "3", "--initial", "1m"}, []string{"broker", "broker"}, 0},
	} {
		code, out, _ := cli(t, noBroker, append([]string{"schedule", "--json", "--queue", "q"}, c.args...)...)
		var got scheduleOut
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("%q: %d %v\n%s", c.args, code, err, out)
		}
		var where []string
		for _, w := range got.Waits {
			where = append(where, w.Where)
			if w.Where == "delays" && (w.Rung != "" || w.Jitter != c.jitter) {
				t.Errorf("%q: %+v", c.args, w)
			}
		}
		onDelays := strings.Contains(strings.Join(where, " "), "delays")
		if strings.Join(where, " ") != strings.Join(c.where, " ") || got.DelayQueues != onDelays || onDelays && len(got.Rungs) != 0 {
			t.Errorf("%q: where %v, delay_queues %v, rungs %v", c.args, where, got.DelayQueues, got.Rungs)
		}
	}
}

func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "Commands:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"schedule", "--queue", "q"}, 2, "--attempts must be at least 1"},
		{[]string{"schedule", "--queue", "q", "--attempts", "3"}, 2, "--initial is needed"},
		{[]string{"schedule", "--queue", "q", "--attempts", "3", "--initial", "1s", "--fixed", "--max", "1m"}, 2, "--max is for an exponential"},
		{[]string{"schedule", "--attempts", "3", "--initial", "ten"}, 2, "invalid value"},
		{[]string{"peek"}, 2, "--queue is required"},
		{[]string{"replay", "--queue", "q", "--from", "graveyard"}, 2, "--from is dlq or parked"},
		{[]string{"replay", "--queue", "q", "--match", "("}, 2, "--match: error parsing regexp"},
		{[]string{"topology", "--queue", "q", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"topology", "--queue", "q", "--arg", "novalue"}, 2, "want key=value"},
		{[]string{"topology"}, 2, "--queue is required (or --delays, for the delay queues alone)"},
		{[]string{"topology", "--delays", "--attempts", "3", "--initial", "1s"}, 2, "give --queue too"},
		{[]string{"topology", "--delays", "--queue", "orders.*"}, 2, "--delays: acemq: destination cannot be delayed to"},
		{[]string{"delays", "--peek", "-1"}, 2, "--peek must be 0 to 1000"},
		{[]string{"delays", "--peek", "1001"}, 2, "--peek must be 0 to 1000"},
		{[]string{"delays", "extra"}, 2, `unexpected argument "extra"`},
	} {
		code, _, errOut := cli(t, noBroker, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%q: status %d, stderr %q; want %d saying %q", c.args, code, errOut, c.code, c.says)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "replay"}, {"replay", "--help"}, {"peek", "-h"}, {"topology", "--help"}, {"schedule", "--help"}, {"delays", "--help"}, {"help", "delays"}} {
		code, out, _ := cli(t, noBroker, args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%q: status %d\n%s", args, code, out)
		}
	}
	_, out, _ := cli(t, noBroker, "replay", "--help")
	for _, want := range []string{"--no-restart", "--match", "moved 137, skipped 363 (drained)", "$ACEMQ_AMQP_URL"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay --help does not mention %s", want)
		}
	}
	// What a peek of the delay queues costs is said where it is asked for.
	_, out, _ = cli(t, noBroker, "delays", "--help")
	for _, want := range []string{"delivery count", "never in a loop", "--peek", "--json", "RabbitMQ 3.10 to 3.13"} {
		if !strings.Contains(out, want) {
			t.Errorf("delays --help does not mention %s", want)
		}
	}
	if _, out, _ = cli(t, noBroker, "help"); !strings.Contains(out, "  delays     show what waits on the delay queues") {
		t.Errorf("the usage does not list delays:\n%s", out)
	}
}

// TestURLFromTheEnvironment: no --url reads ACEMQ_AMQP_URL; neither is a
// usage error.
func TestURLFromTheEnvironment(t *testing.T) {
	_, dial := memoryBroker(t, "orders")
	var got string
	spy := func(ctx context.Context, url string) (transport.Transport, error) { got = url; return dial(ctx, url) }
	t.Setenv(EnvURL, "amqp://guest:from-env@localhost/")
	if code, _, errOut := cli(t, spy, "peek", "--queue", "orders.dlq"); code != 0 || got != "amqp://guest:from-env@localhost/" {
		t.Errorf("status %d, dialled %q, %s", code, got, errOut)
	}
	t.Setenv(EnvURL, "")
	if code, _, errOut := cli(t, spy, "peek", "--queue", "orders.dlq"); code != 2 || !strings.Contains(errOut, "give --url or set $ACEMQ_AMQP_URL") {
		t.Errorf("status %d, %s", code, errOut)
	}
}

// TestPasswordsNeverPrinted: not in a dial error, not in a broker error,
// not in what topology --apply prints.
func TestPasswordsNeverPrinted(t *testing.T) {
	t.Parallel()
	const url = "amqp://ops:hunter2@rabbit.internal:5672/prod"
	failing := func(ctx context.Context, u string) (transport.Transport, error) {
		return nil, fmt.Errorf("dial %s: no route to host (password hunter2)", u)
	}
	_, dial := memoryBroker(t, "orders")
	runs := []struct {
		dial      dialer
		args      []string
		namesHost bool
	}{
		{failing, []string{"peek", "--url", url, "--queue", "orders.dlq"}, true},
		{dial, []string{"peek", "--url", url, "--queue", "missing.dlq"}, false},
		{dial, []string{"replay", "--url", url, "--queue", "missing", "--json"}, false},
		{dial, []string{"topology", "--url", url, "--queue", "orders", "--apply"}, true},
		{dial, []string{"topology", "--url", url, "--delays", "--apply"}, true},
		{dial, []string{"delays", "--url", url, "--peek", "5"}, true},
		{dial, []string{"delays", "--url", url, "--json"}, false},
	}
	for _, r := range runs {
		_, out, errOut := cli(t, r.dial, r.args...)
		if strings.Contains(out+errOut, "hunter2") {
			t.Errorf("%q printed the password:\n%s%s", r.args, out, errOut)
		}
		if r.namesHost && !strings.Contains(out+errOut, "ops:xxxxx@rabbit.internal") {
			t.Errorf("%q does not say which broker:\n%s%s", r.args, out, errOut)
		}
	}
}

func TestPeekConsumesNothing(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: timeout\nat the warehouse", "the handler rejected it: no such customer", "exhausted 5 attempts: timeout")
	code, out, errOut := cli(t, dial, "peek", "--url", "amqp://x", "--queue", "orders.dlq", "--limit", "2")
	want := `orders.dlq: 3 ready, showing the first 2 (none consumed)
ID   ATTEMPT  AGE  REASON
m-1  5        2h   exhausted 5 attempts: timeout\nat the warehouse
m-2  5        2h   the handler rejected it: no such customer
`
	if code != 0 || out != want {
		t.Fatalf("status %d, stderr %s\n%s\nwant\n%s", code, errOut, out, want)
	}
	if ids := dlqIDs(b, "orders"); strings.Join(ids, " ") != "m-1 m-2 m-3" || b.Unacked("orders.dlq") != 0 {
		t.Errorf("after peek the dlq holds %v", ids)
	}
	code, out, _ = cli(t, dial, "peek", "--url", "amqp://x", "--queue", "orders.dlq", "--json", "--body")
	var got peekOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Messages) != 3 || *got.Messages[2].Body != `{"order":"m-3"}` || got.Messages[0].Age != "2h" {
		t.Errorf("%d %v\n%s", code, err, out)
	}
	if _, out, _ = cli(t, dial, "peek", "--url", "amqp://x", "--queue", "orders.dlq", "--body"); !strings.Contains(out, "m-3  attempt 5  age 2h\n  reason: exhausted 5 attempts: timeout\n  body:   {\"order\":\"m-3\"}\n") {
		t.Errorf("peek --body:\n%s", out)
	}
}

func dlqIDs(b *memory.Broker, queue string) []string {
	var ids []string
	for _, d := range b.Peek(acemq.DeadLetterQueue(queue)) {
		ids = append(ids, fmt.Sprint(d.Headers[acemq.HeaderID]))
	}
	return ids
}

func TestReplayCommand(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: the warehouse timed out", "the handler rejected it: no such customer", "exhausted 5 attempts: the warehouse timed out")
	code, out, errOut := cli(t, dial, "replay", "--url", "amqp://x", "--queue", "orders", "--match", "warehouse", "--progress", "1ns")
	if code != 0 || out != "moved 2, skipped 1 (drained)\n" {
		t.Fatalf("status %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "orders.dlq -> orders: moved 1, skipped 1 so far (2 of 3 (66%) read, ") {
		t.Errorf("progress:\n%s", errOut)
	}
	if b.Depth("orders") != 2 || strings.Join(dlqIDs(b, "orders"), " ") != "m-2" {
		t.Errorf("orders %d, dlq %v", b.Depth("orders"), dlqIDs(b, "orders"))
	}
	d := b.Peek("orders")[0]
	if env := acemq.EnvelopeOf(d); env.Attempt != 1 || env.Error != "" || env.ID != "m-1" {
		t.Errorf("replayed %+v", env)
	}
	// --no-restart, --id, --json.
	code, out, _ = cli(t, dial, "replay", "--url", "amqp://x", "--queue", "orders", "--id", "m-2", "--no-restart", "--json")
	var got replayOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got != (replayOut{From: "orders.dlq", To: "orders", Moved: 1, Stopped: "drained", Before: 1}) {
		t.Errorf("%d %v %+v", code, err, got)
	}
	d = b.Peek("orders")[2]
	if env := acemq.EnvelopeOf(d); env.Attempt != 5 || env.Error != "the handler rejected it: no such customer" {
		t.Errorf("replayed with --no-restart %+v", env)
	}
	// A target that does not exist: refused before anything moves.
	seedDeadLetter(t, b.Connect(), "orders", "m-4", "x", memory.Epoch)
	code, out, errOut = cli(t, dial, "replay", "--url", "amqp://x", "--queue", "orders", "--to", "orders.v2")
	if code != 1 || !strings.Contains(errOut, "no queue 'orders.v2'") || b.Depth("orders.dlq") != 1 {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
}

func TestReplayCommandLimitAndParked(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders")
	conn := b.Connect()
	defer conn.Close()
	for i := range 3 {
		_, _ = conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.parked", Headers: map[string]any{acemq.HeaderID: fmt.Sprint(i)}})
	}
	code, out, _ := cli(t, dial, "replay", "--url", "amqp://x", "--queue", "orders", "--from", "parked", "--limit", "2")
	if code != 0 || out != "moved 2, skipped 0 (limit)\n" || b.Depth("orders.parked") != 1 {
		t.Errorf("status %d: %s", code, out)
	}
}

func TestTopologyCommand(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "other")
	flags := []string{"--queue", "orders", "--attempts", "5", "--initial", "10s", "--max", "1m", "--arg", "x-queue-type=quorum", "--arg", "x-delivery-limit=20"}
	code, out, _ := cli(t, noBroker, append([]string{"topology"}, flags...)...)
	for _, want := range []string{
		"dry run", "exchange  acemq.retry", "queue     orders            durable x-delivery-limit=20 x-queue-type=quorum\n",
		"queue     orders.retry.40s  durable x-dead-letter-exchange=acemq.retry x-dead-letter-routing-key=orders x-message-ttl=40000\n",
		"queue     orders.retry.1m   durable", "binding   orders            to exchange acemq.retry with key orders\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status %d, missing %q in\n%s", code, want, out)
		}
	}
	if _, ok := b.Queue("orders"); ok {
		t.Fatal("a dry run declared something")
	}
	code, out, errOut := cli(t, dial, append([]string{"topology", "--url", "amqp://x", "--apply", "--json"}, flags...)...)
	var got topologyOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || !got.Applied || len(got.Queues) != 5 {
		t.Fatalf("%d %v %s %s", code, err, out, errOut)
	}
	q, ok := b.Queue("orders.retry.40s")
	if !ok || fmt.Sprint(q.Args) != fmt.Sprint(retry.RungArgs("orders", 40*time.Second)) || len(b.Bindings("orders")) != 1 {
		t.Errorf("declared %v %v", q, b.Bindings("orders"))
	}
	// Applying a topology the broker disagrees with is an error.
	code, _, errOut = cli(t, dial, "topology", "--url", "amqp://x", "--apply", "--queue", "orders")
	if code != 1 || !strings.Contains(errOut, "precondition failed") {
		t.Errorf("status %d: %s", code, errOut)
	}
}

// TestTopologyDelays: --delays prints and declares the delay queues, and
// with --queue the queue's binding to them; --on-delay-queues implies it.
func TestTopologyDelays(t *testing.T) {
	t.Parallel()
	code, out, _ := cli(t, noBroker, "topology", "--delays")
	for _, want := range []string{
		"the delay queues of a vhost (dry run: --apply declares them):\n",
		"exchange  acemq.delay.v1.deliver           topic durable alternate-exchange=acemq.delay.v1.undeliverable\n",
		"queue     acemq.delay.v1.03                durable x-dead-letter-exchange=acemq.delay.v1.02 x-dead-letter-strategy=at-least-once x-message-ttl=1000 x-overflow=reject-publish x-queue-type=quorum\n",
		"binding   acemq.delay.v1.27                to exchange acemq.delay.v1.27 with key 1.#\n",
		"binding   exchange acemq.delay.v1.deliver  to exchange acemq.delay.v1.00 with key " + strings.Repeat("*.", 27) + "0.#\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status %d, missing %q in\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "acemq.retry") {
		t.Errorf("the delay queues alone declare no queue's topology:\n%s", out)
	}
	// --on-delay-queues: the queue's topology, no rung, the delay queues and the binding.
	code, out, _ = cli(t, noBroker, "topology", "--json", "--queue", "orders", "--attempts", "4", "--initial", "1m", "--on-delay-queues")
	var dry topologyOut
	if err := json.Unmarshal([]byte(out), &dry); code != 0 || err != nil || dry.Applied || dry.DelayQueues != "quorum" ||
		len(dry.Queues) != 3+delay.Levels+1 || len(dry.ExchangeBindings) != delay.Levels || len(dry.Exchanges) != 2+delay.Levels+2 {
		t.Fatalf("%d %v %+v", code, err, dry)
	}
	if last := dry.Bindings[len(dry.Bindings)-1]; last != (bindingJSON{"orders", delay.Deliver, strings.Repeat("*.", 28) + "orders"}) {
		t.Errorf("the last binding is %+v", last)
	}

	b, dial := memoryBroker(t, "other")
	code, out, errOut := cli(t, dial, "topology", "--url", "amqp://x", "--delays", "--queue", "orders", "--apply")
	if code != 0 || !strings.HasPrefix(out, "declared on amqp://x:\n") {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	for k := range delay.Levels {
		if q, ok := b.Queue(delay.Level(k)); !ok || q.Args["x-queue-type"] != "quorum" {
			t.Errorf("level %d: %+v %v", k, q, ok)
		}
	}
	if got := b.Bindings("orders"); len(got) != 2 || got[0] != (transport.Binding{Queue: "orders", Exchange: delay.Deliver, Key: strings.Repeat("*.", 28) + "orders"}) {
		t.Errorf("orders is bound %v", got)
	}
	// Delivered through them: the binding works.
	conn := b.Connect()
	defer conn.Close()
	scheduleOn(t, conn, b.Clock().Now(), "orders", 3*time.Second, "o-1")
	b.Clock().Advance(3 * time.Second)
	if b.Depth("orders") != 1 {
		t.Errorf("orders holds %d after its delay", b.Depth("orders"))
	}
	// Again: nothing changes.
	if code, _, errOut := cli(t, dial, "topology", "--url", "amqp://x", "--delays", "--apply"); code != 0 {
		t.Errorf("status %d: %s", code, errOut)
	}
}

// TestTopologyDelaysClassic: before RabbitMQ 3.10 --apply declares the
// classic layout and says what that risks; later, the classic queues an
// older broker declared are kept.
func TestTopologyDelaysClassic(t *testing.T) {
	t.Parallel()
	b := memory.New()
	code, out, errOut := cli(t, asRabbitMQ(b, "3.9.29"), "topology", "--url", "amqp://x", "--delays", "--apply", "--json")
	var got topologyOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.DelayQueues != "classic" {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	if q, ok := b.Queue(delay.Level(0)); !ok || q.Args["x-queue-type"] != nil || q.Args["x-dead-letter-strategy"] != nil {
		t.Errorf("level 0 %+v", q)
	}
	code, out, errOut = cli(t, asRabbitMQ(b, "3.9.29"), "topology", "--url", "amqp://x", "--delays", "--apply")
	if code != 0 || !strings.Contains(out, "(RabbitMQ 3.9.29 cannot hold quorum queues with at-least-once dead-lettering, so the delay queues are classic: a node lost while messages wait on them loses those messages)\n") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, asRabbitMQ(b, "4.1.2"), "topology", "--url", "amqp://x", "--delays", "--apply", "--queue", "orders")
	if code != 0 || !strings.Contains(out, "queue     acemq.delay.v1.00                durable x-dead-letter-exchange=acemq.delay.v1.deliver x-message-ttl=125 x-overflow=reject-publish\n") ||
		!strings.Contains(out, "(the delay queues exist as classic queues, declared so by an older broker, and are kept") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	if len(b.Bindings("orders")) != 2 {
		t.Errorf("orders is bound %v", b.Bindings("orders"))
	}
}

// TestPeekForeignMessage: a message from a producer outside the family
// shows its AMQP message id and timestamp, the same on every peek; one
// with neither shows "-" for both, not an id or an age made up.
func TestPeekForeignMessage(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders")
	conn := b.Connect()
	defer conn.Close()
	_, _ = conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.dlq",
		Properties: transport.Properties{MessageID: "legacy-7", Timestamp: memory.Epoch.Add(-50 * time.Hour)}})
	_, _ = conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.dlq"})
	for range 2 {
		code, out, _ := cli(t, dial, "peek", "--url", "amqp://x", "--queue", "orders.dlq")
		if code != 0 || !strings.Contains(out, "legacy-7  1        2d2h  -\n") || !strings.Contains(out, "-         1        -     -\n") {
			t.Errorf("status %d\n%s", code, out)
		}
	}
	_, out, _ := cli(t, dial, "peek", "--url", "amqp://x", "--queue", "orders.dlq", "--json")
	var got peekOut
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Messages) != 2 {
		t.Fatalf("%v\n%s", err, out)
	}
	if c := got.Messages[0].Created; c == nil || !c.Equal(memory.Epoch.Add(-50*time.Hour)) {
		t.Errorf("created of legacy-7 = %v", c)
	}
	if m := got.Messages[1]; m.Created != nil || m.Age != "-" || m.ID != "-" {
		t.Errorf("a message with no id nor time: %+v", m)
	}
}
