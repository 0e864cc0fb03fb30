package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// tryPublish publishes body to queue and says how it went: "ok",
// "nacked", or the error.
func (f *fixture) tryPublish(queue, body string) string {
	f.t.Helper()
	_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: queue, Mandatory: true, Body: []byte(body)})
	switch {
	case err == nil:
		return "ok"
	case strings.Contains(err.Error(), transport.ErrNacked.Error()):
		wantErr(f.t, "nack of "+body, err, transport.ErrNacked)
		return "nacked"
	}
	return err.Error()
}

func (f *fixture) tryPublishAll(queue string, bodies ...string) string {
	f.t.Helper()
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = f.tryPublish(queue, b)
	}
	return strings.Join(out, " ")
}

func (f *fixture) holds(queue, want string) {
	f.t.Helper()
	if got := strings.Join(f.bodies(queue), " "); got != want {
		f.t.Errorf("%s holds %q, want %q", queue, got, want)
	}
}

// TestRejectPublishCountsReadyOnly: a classic queue's x-max-length counts
// its ready messages, not the unacked ones (as on RabbitMQ 3.10.8).
func TestRejectPublishCountsReadyOnly(t *testing.T) {
	f := setup(t)
	f.queue("q", map[string]any{"x-max-length": 2, "x-overflow": "reject-publish"})
	if got := f.tryPublishAll("q", "a", "b", "c"); got != "ok ok nacked" {
		t.Fatalf("publishes: %s", got)
	}
	_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q"})
	if err == nil || !strings.Contains(err.Error(), "queue 'q' is full (x-max-length 2, x-overflow reject-publish)") {
		t.Errorf("nack error %v does not say why", err)
	}
	sub := f.consume("q", 1)
	a := f.recv(sub, "a")
	if got := f.tryPublishAll("q", "d", "e"); got != "ok nacked" {
		t.Errorf("with one unacked and one ready: %s", got)
	}
	if f.b.Unacked("q") != 1 || f.b.Depth("q") != 2 {
		t.Errorf("unacked %d ready %d, want 1 and 2", f.b.Unacked("q"), f.b.Depth("q"))
	}
	f.ack(a)
	f.ack(f.recv(sub, "b"))
	f.ack(f.recv(sub, "d"))
	f.none(sub)
}

// TestMaxLengthZero: reject-publish nacks every publish, even with a
// consumer waiting; drop-head dead-letters every message no consumer is
// waiting for and delivers the others.
func TestMaxLengthZero(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "reject", Durable: true, Args: map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"}},
		{Name: "drop", Durable: true, Args: map[string]any{"x-max-length": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}},
		{Name: "dlq", Durable: true},
	}})
	if got := f.tryPublish("reject", "a"); got != "nacked" {
		t.Errorf("no consumer: %s", got)
	}
	sub := f.consume("reject", 1)
	if got := f.tryPublish("reject", "b"); got != "nacked" {
		t.Errorf("a consumer waiting: %s", got)
	}
	f.none(sub)

	f.send("drop", "x")
	f.holds("drop", "")
	f.holds("dlq", "x")
	ds := f.consume("drop", 1)
	f.send("drop", "y")
	f.ack(f.recv(ds, "y"))
	f.holds("dlq", "x")
}

// TestDropHead: the oldest ready message makes room, dead-lettered with
// reason maxlen; unacked ones do not count; a delivery given back to the
// head of a full queue is the one dropped.
func TestDropHead(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "q", Durable: true, Args: map[string]any{"x-max-length": 2, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}},
		{Name: "dlq", Durable: true},
	}})
	for _, b := range []string{"a", "b", "c"} {
		f.send("q", b)
	}
	f.holds("q", "b c")
	dead := f.b.Peek("dlq")
	if len(dead) != 1 || string(dead[0].Body) != "a" {
		t.Fatalf("dlq holds %v", f.bodies("dlq"))
	}
	d := deaths(t, dead[0].Headers)
	if d[0]["reason"] != "maxlen" || d[0]["queue"] != "q" || dead[0].Headers["x-first-death-reason"] != "maxlen" {
		t.Errorf("x-death %v", d)
	}
	if dead[0].Exchange != "" || dead[0].RoutingKey != "dlq" {
		t.Errorf("dead letter exchange %q key %q", dead[0].Exchange, dead[0].RoutingKey)
	}

	sub := f.consume("q", 1)
	b := f.recv(sub, "b")
	f.send("q", "d")
	f.holds("q", "c d")
	f.send("q", "e")
	f.holds("q", "d e")
	f.holds("dlq", "a c")
	f.reject(b, true) // back to the head: b d e, one too many
	f.holds("dlq", "a c b")
	f.ack(f.recv(sub, "d"))
	f.ack(f.recv(sub, "e"))
	f.none(sub)
}

// TestMaxLengthBytes: the limit is on the ready messages' bodies; under
// drop-head a message larger than the limit drops itself.
func TestMaxLengthBytes(t *testing.T) {
	f := setup(t)
	f.queue("reject", map[string]any{"x-max-length-bytes": 5, "x-overflow": "reject-publish"})
	f.queue("drop", map[string]any{"x-max-length-bytes": 5})
	big := map[string]any{"h": strings.Repeat("x", 1000)}
	if _, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "reject", Headers: big, Body: []byte("abc")}); err != nil {
		t.Fatalf("headers count towards the limit: %v", err)
	}
	if got := f.tryPublishAll("reject", "de", "f", ""); got != "ok nacked ok" {
		t.Errorf("publishes: %s", got)
	}
	sub := f.consume("reject", 1)
	f.recv(sub, "abc") // unacked: its bytes no longer count
	if got := f.tryPublish("reject", "xyz"); got != "ok" {
		t.Errorf("with the big one unacked: %s", got)
	}
	for _, b := range []string{"abc", "de", "f"} {
		f.send("drop", b)
	}
	f.holds("drop", "de f")
	f.send("drop", "123456")
	f.holds("drop", "")
}

// TestRejectPublishDLX: the publish is nacked and the message
// dead-lettered, reason maxlen.
func TestRejectPublishDLX(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "q", Durable: true, Args: map[string]any{
			"x-max-length": 1, "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
		}},
		{Name: "dlq", Durable: true},
	}})
	if got := f.tryPublishAll("q", "a", "b"); got != "ok nacked" {
		t.Errorf("publishes: %s", got)
	}
	f.holds("q", "a")
	dead := f.b.Peek("dlq")
	if len(dead) != 1 || string(dead[0].Body) != "b" || deaths(t, dead[0].Headers)[0]["reason"] != "maxlen" {
		t.Errorf("dlq holds %v", dead)
	}
}

// TestRejectPublishOneOfSeveral: a message routed to a full queue and
// another is nacked, and the other keeps its copy; a dead letter refused
// by a full queue is lost.
func TestRejectPublishOneOfSeveral(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "fan", Kind: "fanout", Durable: true}},
		Queues: []transport.Queue{
			{Name: "full", Durable: true, Args: map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"}},
			{Name: "other", Durable: true},
			{Name: "src", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "full"}},
		},
		Bindings: []transport.Binding{{Queue: "full", Exchange: "fan"}, {Queue: "other", Exchange: "fan"}},
	})
	_, err := f.c.Publish(f.ctx, transport.Publishing{Exchange: "fan", Mandatory: true, Body: []byte("m")})
	wantErr(t, "fanout to a full queue", err, transport.ErrNacked)
	if !strings.Contains(err.Error(), "'full'") {
		t.Errorf("%v does not name the full queue", err)
	}
	f.holds("other", "m")

	f.send("src", "dl")
	f.reject(f.recv(f.consume("src", 1), "dl"), false)
	f.holds("full", "")
	f.holds("src", "")
}

// TestQuorumRejectPublish: a quorum queue takes the publish that goes
// over its limit, nacks the next ones (on any connection) and takes
// publishes again once it is down to 80% of its limit, as RabbitMQ
// 3.10.8's quorum queues do.
func TestQuorumRejectPublish(t *testing.T) {
	f := setup(t)
	f.queue("qq", map[string]any{"x-queue-type": "quorum", "x-max-length": 10, "x-overflow": "reject-publish"})
	var got []string
	for i := range 12 {
		got = append(got, f.tryPublish("qq", fmt.Sprint(i)))
	}
	if s := strings.Join(got, " "); s != strings.Repeat("ok ", 11)+"nacked" {
		t.Fatalf("publishes: %s", s)
	}
	other := f.b.Connect()
	defer other.Close()
	if _, err := other.Publish(f.ctx, transport.Publishing{RoutingKey: "qq"}); err == nil {
		t.Error("another connection's publish was taken")
	}
	for i, want := range []string{"nacked", "nacked", "ok"} { // ready 10, 9, then 8
		if _, ok, err := f.c.Get(f.ctx, "qq"); !ok || err != nil {
			t.Fatalf("Get: %v, %v", ok, err)
		}
		if got := f.tryPublish("qq", "p"); got != want {
			t.Errorf("after taking %d: %s, want %s", i+1, got, want)
		}
	}
	if got := f.tryPublishAll("qq", "p", "p", "p"); got != "ok ok nacked" {
		t.Errorf("filling up again: %s", got)
	}
}

// TestQuorumOverflow: reject-publish-dlx on a quorum queue drops the head,
// as RabbitMQ 3.10.8 does; so does drop-head.
func TestQuorumOverflow(t *testing.T) {
	f := setup(t)
	f.queue("dlq", nil)
	for _, overflow := range []string{"drop-head", "reject-publish-dlx"} {
		q := "qq." + overflow
		f.queue(q, map[string]any{
			"x-queue-type": "quorum", "x-max-length": 1, "x-overflow": overflow,
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
		})
		if got := f.tryPublishAll(q, "a", "b", "c"); got != "ok ok ok" {
			t.Errorf("%s: publishes %s", overflow, got)
		}
		f.holds(q, "c")
	}
	f.holds("dlq", "a b a b")
}

// TestQuorumDropHeadGivenBack: a delivery given back to a full quorum
// queue goes to the back, and the oldest ready message is dropped (as on
// RabbitMQ 3.10.8).
func TestQuorumDropHeadGivenBack(t *testing.T) {
	f := setup(t)
	f.queue("dlq", nil)
	f.queue("qq", map[string]any{
		"x-queue-type": "quorum", "x-max-length": 2, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
	})
	f.send("qq", "a")
	f.send("qq", "b")
	a, ok, err := f.c.Get(f.ctx, "qq")
	if !ok || err != nil {
		t.Fatalf("Get: %v, %v", ok, err)
	}
	f.send("qq", "c")
	f.reject(a, true)
	f.holds("qq", "c a")
	f.holds("dlq", "b")
}

// TestLimitArgsRefused: bad values are refused in RabbitMQ 3.10.8's words.
func TestLimitArgsRefused(t *testing.T) {
	f := setup(t)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"x-max-length": -1}, "invalid arg 'x-max-length' for queue 'q': {value_negative,-1}"},
		{map[string]any{"x-max-length": "5"}, `invalid arg 'x-max-length' for queue 'q': "expected integer, got longstr"`},
		{map[string]any{"x-max-length": 1.5}, `invalid arg 'x-max-length' for queue 'q': "expected integer, got double"`},
		{map[string]any{"x-max-length-bytes": -1}, "invalid arg 'x-max-length-bytes' for queue 'q': {value_negative,-1}"},
		{map[string]any{"x-max-length-bytes": true}, `invalid arg 'x-max-length-bytes' for queue 'q': "expected integer, got bool"`},
		{map[string]any{"x-overflow": "foo"}, "invalid arg 'x-overflow' for queue 'q': invalid_overflow"},
		{map[string]any{"x-overflow": "Reject-Publish"}, "invalid arg 'x-overflow' for queue 'q': invalid_overflow"},
		{map[string]any{"x-overflow": 5}, "invalid arg 'x-overflow' for queue 'q': {unacceptable_type,signedint}"},
		{map[string]any{"x-overflow": int64(5)}, "invalid arg 'x-overflow' for queue 'q': {unacceptable_type,long}"},
		{map[string]any{"x-max-length": -5, "x-overflow": "foo"}, "{value_negative,-5}"},
		{map[string]any{"x-message-ttl": -1}, "invalid arg 'x-message-ttl' for queue 'q': {value_negative,-1}"},
		{map[string]any{"x-dead-letter-exchange": 5}, "invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'q'"},
		{map[string]any{"x-dead-letter-exchange": "x", "x-dead-letter-routing-key": 5}, "invalid arg 'x-dead-letter-routing-key' for queue 'q': {unacceptable_type,signedint}"},
		{map[string]any{"x-queue-type": "quorum", "x-overflow": "foo"}, "invalid_overflow"},
	} {
		err := f.c.Declare(f.ctx, transport.Topology{Queues: []transport.Queue{{Name: "q", Durable: true, Args: tc.args}}})
		wantErr(t, fmt.Sprint(tc.args), err, transport.ErrPreconditionFailed)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %q, want it to say %q", tc.args, err, tc.want)
		}
	}
	if _, ok := f.b.Queue("q"); ok {
		t.Error("a refused queue exists")
	}
	f.queue("q", map[string]any{"x-max-length": int64(1) << 40, "x-overflow": "reject-publish-dlx"})
}
