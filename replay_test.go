package acemq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

// The replay suite runs on the memory transport and on RabbitMQ: the same
// cases, with time advanced on the virtual clock or slept through.

// replayEnv is one case's broker.
type replayEnv struct {
	t      *testing.T
	tr     transport.Transport
	q      string // the work queue; its .dlq holds the dead letters
	rung   time.Duration
	depth  func(queue string) int
	tick   func(d time.Duration)               // let d pass
	within func(what string, cond func() bool) // wait until cond holds
}

// replayCreated is the creation time every seeded dead letter carries.
var replayCreated = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

// seed puts dead letters in the dlq as a server leaves them, with the
// broker's own headers a message picks up on the way, and returns their ids.
func (e *replayEnv) seed(reasons ...string) []string {
	e.t.Helper()
	var ids []string
	for i, reason := range reasons {
		id := fmt.Sprintf("m-%d", i+1)
		ids = append(ids, id)
		_, err := e.tr.Publish(context.Background(), transport.Publishing{
			RoutingKey: acemq.DeadLetterQueue(e.q), Mandatory: true,
			Headers: map[string]any{
				acemq.HeaderID: id, acemq.HeaderAttempt: int64(5), acemq.HeaderError: reason,
				acemq.HeaderCreated: replayCreated.UnixMilli(), acemq.HeaderExchange: "", acemq.HeaderRoutingKey: e.q,
				"x-death":             []any{map[string]any{"queue": e.q, "reason": "expired", "count": int64(1), "exchange": "", "routing-keys": []any{e.q}}},
				"x-first-death-queue": e.q, "x-first-death-reason": "expired", "x-last-death-queue": e.q,
				"CC":     []any{e.q + ".cc"},
				"tenant": "acme",
			},
			Properties: transport.Properties{MessageID: id, Expiration: "600000", UserID: "guest", ContentType: "application/json"},
			Body:       []byte(fmt.Sprintf(`{"n":%d}`, i+1)),
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return ids
}

// take waits until queue holds want messages, takes them all in order and
// acks them.
func (e *replayEnv) take(queue string, want int) []transport.Delivery {
	e.t.Helper()
	e.within(fmt.Sprintf("%d messages in %s", want, queue), func() bool { return e.depth(queue) == want })
	var out []transport.Delivery
	for range want {
		d, ok, err := e.tr.Get(context.Background(), queue)
		if err != nil || !ok {
			e.t.Fatalf("get from %s: %v %v", queue, ok, err)
		}
		if err := d.Ack(); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func replayIDs(ds []transport.Delivery) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, acemq.NewMessage(d.Queue, d.Body, d.Headers).ID())
	}
	return ids
}

func (e *replayEnv) replay(opts acemq.ReplayOptions) (acemq.ReplayResult, error) {
	return acemq.Replay(context.Background(), e.tr, acemq.DeadLetterQueue(e.q), opts)
}

var replayCases = []struct {
	name string
	run  func(t *testing.T, e *replayEnv)
}{
	{"MovesRestartedWithoutBrokerHeaders", func(t *testing.T, e *replayEnv) {
		ids := e.seed("exhausted 5 attempts: timeout", "the handler rejected it: no", "exhausted 5 attempts: timeout")
		res, err := e.replay(acemq.ReplayOptions{})
		if err != nil || res.String() != "moved 3, skipped 0 (drained)" {
			t.Fatalf("%v, %v", res, err)
		}
		got := e.take(e.q, 3)
		if !slices.Equal(replayIDs(got), ids) {
			t.Errorf("order %v, want %v", replayIDs(got), ids)
		}
		for _, d := range got {
			env := acemq.EnvelopeOf(d)
			if env.Attempt != 1 || env.Error != "" || !env.CreatedAt.Equal(replayCreated) || env.RoutingKey != e.q {
				t.Errorf("envelope %+v", env)
			}
			for k := range d.Headers {
				if k == "x-death" || k == "CC" || strings.HasPrefix(k, "x-first-death") || strings.HasPrefix(k, "x-last-death") {
					t.Errorf("the copy carries the broker's %s", k)
				}
			}
			if d.Headers["tenant"] != "acme" || d.Expiration != "" || d.UserID != "" || d.ContentType != "application/json" {
				t.Errorf("copy headers %v, expiration %q, user %q", d.Headers, d.Expiration, d.UserID)
			}
		}
		// Each seed's CC put one copy there; the replayed copies add none.
		if n := e.depth(e.q + ".cc"); n != 3 {
			t.Errorf("%s holds %d, want 3", e.q+".cc", n)
		}
	}},
	{"KeepAttempts", func(t *testing.T, e *replayEnv) {
		e.seed("exhausted 5 attempts: timeout")
		if res, err := e.replay(acemq.ReplayOptions{KeepAttempts: true}); err != nil || res.Moved != 1 {
			t.Fatalf("%v, %v", res, err)
		}
		env := acemq.NewMessage(e.q, nil, e.take(e.q, 1)[0].Headers).Envelope()
		if env.Attempt != 5 || env.Error != "exhausted 5 attempts: timeout" || env.ID != "m-1" {
			t.Errorf("envelope %+v", env)
		}
	}},
	{"Limit", func(t *testing.T, e *replayEnv) {
		ids := e.seed("a", "b", "c", "d", "e")
		res, err := e.replay(acemq.ReplayOptions{Limit: 2})
		if err != nil || res.String() != "moved 2, skipped 0 (limit)" {
			t.Fatalf("%v, %v", res, err)
		}
		if got := replayIDs(e.take(acemq.DeadLetterQueue(e.q), 3)); !slices.Equal(got, ids[2:]) {
			t.Errorf("left %v", got)
		}
	}},
	{"FilterKeepsSkippedInOrder", func(t *testing.T, e *replayEnv) {
		ids := e.seed("timeout", "no such customer", "timeout", "bad date", "timeout", "no such sku")
		var progress []string
		res, err := e.replay(acemq.ReplayOptions{
			Filter: func(env acemq.Envelope, body []byte) bool {
				return strings.Contains(env.Error, "timeout") && len(body) > 0
			},
			Progress: func(r acemq.ReplayResult) { progress = append(progress, r.String()) },
		})
		if err != nil || res.String() != "moved 3, skipped 3 (drained)" {
			t.Fatalf("%v, %v", res, err)
		}
		if len(progress) != 6 || progress[5] != "moved 3, skipped 3" {
			t.Errorf("progress %q", progress)
		}
		if got := replayIDs(e.take(e.q, 3)); !slices.Equal(got, []string{ids[0], ids[2], ids[4]}) {
			t.Errorf("moved %v", got)
		}
		if got := replayIDs(e.take(acemq.DeadLetterQueue(e.q), 3)); !slices.Equal(got, []string{ids[1], ids[3], ids[5]}) {
			t.Errorf("left %v, want them in their order", got)
		}
	}},
	{"Deadline", func(t *testing.T, e *replayEnv) {
		e.seed("a", "b", "c", "d", "e", "f")
		// Each message takes a tick to look at; the deadline is 2.5 ticks.
		tick := 100 * time.Millisecond
		res, err := e.replay(acemq.ReplayOptions{Deadline: 5 * tick / 2, Filter: func(acemq.Envelope, []byte) bool { e.tick(tick); return true }})
		if err != nil || res.Stopped != acemq.ReplayDeadline || res.Moved < 1 || res.Moved > 3 {
			t.Fatalf("%v, %v", res, err)
		}
		e.take(acemq.DeadLetterQueue(e.q), 6-res.Moved)
	}},
	{"UnroutableStopsAndKeepsTheOriginal", func(t *testing.T, e *replayEnv) {
		ids := e.seed("a", "b", "c")
		skipFirst := func(env acemq.Envelope, _ []byte) bool { return env.ID != ids[0] }
		res, err := e.replay(acemq.ReplayOptions{To: e.q + ".nowhere", Filter: skipFirst})
		var rerr *acemq.ReplayError
		if !errors.Is(err, acemq.ErrUnroutable) || !errors.As(err, &rerr) || rerr.ID != ids[1] || rerr.To != e.q+".nowhere" {
			t.Fatalf("error %v", err)
		}
		if res.String() != "moved 0, skipped 1 (error)" {
			t.Errorf("result %v", res)
		}
		if got := replayIDs(e.take(acemq.DeadLetterQueue(e.q), 3)); !slices.Equal(got, ids) {
			t.Errorf("left %v, want %v", got, ids)
		}
	}},
	{"ComesHomeThroughARung", func(t *testing.T, e *replayEnv) {
		// The dead letter once expired out of the queue itself (its x-death
		// names it). Replayed onto a rung, it expires home to that queue: with
		// the stale x-death still on it the broker would see a dead-letter
		// cycle and drop it.
		e.seed("timeout")
		rung := retry.RungName(e.q, e.rung)
		if res, err := e.replay(acemq.ReplayOptions{To: rung}); err != nil || res.Moved != 1 {
			t.Fatalf("%v, %v", res, err)
		}
		e.tick(e.rung)
		d := e.take(e.q, 1)[0]
		if d.Exchange != retry.Exchange || acemq.NewMessage(e.q, nil, d.Headers).ID() != "m-1" {
			t.Errorf("arrived through %q: %v", d.Exchange, d.Headers)
		}
	}},
	{"TheBrokerDropsACycle", func(t *testing.T, e *replayEnv) {
		// The control for the case above: the same message with its x-death,
		// published straight onto the rung, never comes home.
		e.seed("timeout")
		d := e.take(acemq.DeadLetterQueue(e.q), 1)[0]
		_, err := e.tr.Publish(context.Background(), transport.Publishing{RoutingKey: retry.RungName(e.q, e.rung), Headers: d.Headers, Body: d.Body})
		if err != nil {
			t.Fatal(err)
		}
		e.tick(e.rung)
		e.within("the rung empty", func() bool { return e.depth(retry.RungName(e.q, e.rung)) == 0 })
		e.tick(e.rung)
		if n := e.depth(e.q); n != 0 {
			t.Errorf("%d came home; the broker did not drop the cycle", n)
		}
	}},
	{"SkippedKeepTheirOrderOnAQuorumQueue", func(t *testing.T, e *replayEnv) {
		// RabbitMQ 3.10 puts what comes back to a quorum queue (without a
		// delivery limit) at its back, in the order it comes back: a replay
		// that drains the queue leaves the skipped ones in their order.
		src := e.q + ".quorum"
		if err := e.tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{
			{Name: src, Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}}}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := e.tr.Publish(context.Background(), transport.Publishing{RoutingKey: src, Headers: map[string]any{acemq.HeaderID: fmt.Sprint(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := acemq.Replay(context.Background(), e.tr, src, acemq.ReplayOptions{To: e.q,
			Filter: func(env acemq.Envelope, _ []byte) bool { return env.ID == "1" || env.ID == "3" }})
		if err != nil || res.String() != "moved 2, skipped 3 (drained)" {
			t.Fatalf("%v, %v", res, err)
		}
		if got := replayIDs(e.take(src, 3)); !slices.Equal(got, []string{"0", "2", "4"}) {
			t.Errorf("left %v", got)
		}
	}},
	{"NoTarget", func(t *testing.T, e *replayEnv) {
		other := e.q + ".graveyard"
		e.declare(other)
		for _, x := range []string{"", "amq.direct"} {
			_, err := e.tr.Publish(context.Background(), transport.Publishing{RoutingKey: other, Headers: map[string]any{
				acemq.HeaderID: "from-" + x, acemq.HeaderExchange: x, acemq.HeaderRoutingKey: e.q,
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
		res, err := acemq.Replay(context.Background(), e.tr, other, acemq.ReplayOptions{})
		if !errors.Is(err, acemq.ErrNoReplayTarget) || res.Moved != 1 {
			t.Fatalf("%v, %v", res, err)
		}
		e.take(e.q, 1)
		e.take(other, 1)
	}},
	{"MissingSource", func(t *testing.T, e *replayEnv) {
		res, err := acemq.Replay(context.Background(), e.tr, e.q+".nothing.dlq", acemq.ReplayOptions{})
		if !errors.Is(err, transport.ErrNotFound) || res.Stopped != acemq.ReplayFailed {
			t.Fatalf("%v, %v", res, err)
		}
	}},
}

func (e *replayEnv) declare(queues ...string) {
	e.t.Helper()
	var top transport.Topology
	for _, q := range queues {
		top.Queues = append(top.Queues, transport.Queue{Name: q, Durable: true})
	}
	if err := e.tr.Declare(context.Background(), top); err != nil {
		e.t.Fatal(err)
	}
}

// declareQueue declares the contract's topology for e.q with one rung, and a
// queue to see where CC would have sent a copy.
func (e *replayEnv) declareQueue() {
	e.t.Helper()
	p := retry.Fixed(2, e.rung).WithBrokerWaitThreshold(e.rung)
	if err := e.tr.Declare(context.Background(), acemq.Topology(e.q, p, nil)); err != nil {
		e.t.Fatal(err)
	}
	e.declare(e.q + ".cc")
}

func TestReplayMemory(t *testing.T) {
	t.Parallel()
	for _, c := range replayCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := memory.New()
			conn := b.Connect()
			t.Cleanup(func() { conn.Close() })
			e := &replayEnv{t: t, tr: conn, q: "orders", rung: 40 * time.Second, depth: b.Depth,
				tick: b.Clock().Advance, within: replayWithin(t)}
			e.declareQueue()
			c.run(t, e)
		})
	}
}

func TestReplayRabbitMQ(t *testing.T) {
	t.Parallel()
	url := replayURL(t)
	for _, c := range replayCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tr, err := rabbitmq.Dial(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			e := &replayEnv{t: t, tr: tr, q: replayQueueName(t), rung: 300 * time.Millisecond, tick: time.Sleep, within: replayWithin(t)}
			e.depth = func(q string) int {
				info, err := tr.Inspect(context.Background(), q)
				if err != nil {
					return -1
				}
				return info.Messages
			}
			replayDeleteAfter(t, url, e.q)
			e.declareQueue()
			c.run(t, e)
		})
	}
}

// replayURL is ACEMQ_AMQP_URL; without it the test skips, unless CI is set.
func replayURL(t *testing.T) string {
	t.Helper()
	url := brokertest.SharedURL(t)
	return url
}

func replayQueueName(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "replay." + strings.ReplaceAll(t.Name(), "/", ".") + "." + hex.EncodeToString(b)
}

// replayDeleteAfter deletes every queue named q or q.* when the test ends.
func replayDeleteAfter(t *testing.T, url, q string) {
	t.Cleanup(func() {
		conn, err := amqp.Dial(url)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		for _, name := range []string{q, q + ".dlq", q + ".parked", q + ".cc", q + ".graveyard", q + ".quorum", q + ".retry.300ms"} {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(name, false, false, false)
				_ = ch.Close()
			}
		}
	})
}

func replayWithin(t *testing.T) func(string, func() bool) {
	return func(what string, cond func() bool) {
		t.Helper()
		polltest.Eventually(t, what, cond)
	}
}

// unsure is a transport whose publishes go through but are never
// confirmed, or are nacked.
type unsure struct {
	transport.Transport
	err error
}

func (u unsure) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	_, _ = u.Transport.Publish(ctx, p)
	return transport.Confirmation{}, u.err
}
