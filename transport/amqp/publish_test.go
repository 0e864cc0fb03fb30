package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// declareQueue declares a durable queue with args and returns its name.
func declareQueue(tb testing.TB, tr *Transport, suffix string, args map[string]any) string {
	tb.Helper()
	q := name(tb, suffix)
	err := tr.Declare(testCtx(tb, 10*time.Second), transport.Topology{
		Queues: []transport.Queue{{Name: q, Durable: true, Args: args}},
	})
	if err != nil {
		tb.Fatalf("Declare %s: %v", q, err)
	}
	tb.Cleanup(func() { deleteQueue(tb, q) })
	return q
}

func TestPublishRoutedRoundTrip(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "q", nil)
	ctx := testCtx(t, 10*time.Second)
	ts := time.Unix(1700000000, 0).UTC()
	created := time.Now().UnixMilli()
	pub := transport.Publishing{
		RoutingKey: q,
		Mandatory:  true,
		Headers: map[string]any{
			"x-acemq-id": "id-1", "x-acemq-attempt": 1, "created-ms": int(created),
			"nested": map[string]any{"list": []any{"a", int64(2)}},
		},
		Properties: transport.Properties{
			ContentType: "application/json", DeliveryMode: 2, MessageID: "user-id",
			CorrelationID: "c", Type: "order", AppID: "app", Timestamp: ts,
		},
		Body: []byte(`{"n":1}`),
	}
	conf, err := tr.Publish(ctx, pub)
	if err != nil || !conf.Routed {
		t.Fatalf("Publish = %+v, %v; want routed", conf, err)
	}
	d := getOne(t, tr, q)
	if d.Queue != q || d.Exchange != "" || d.RoutingKey != q || d.Redelivered {
		t.Errorf("delivery envelope = %q %q %q %v", d.Queue, d.Exchange, d.RoutingKey, d.Redelivered)
	}
	if _, leaked := d.Headers[seqHeader]; leaked {
		t.Errorf("internal header %s reached the consumer", seqHeader)
	}
	if d.Headers["x-acemq-id"] != "id-1" || d.Headers["x-acemq-attempt"] != int32(1) {
		t.Errorf("headers = %#v", d.Headers)
	}
	if got := d.Headers["created-ms"]; got != created {
		t.Errorf("a millisecond timestamp must survive at full width: %#v", d.Headers["created-ms"])
	}
	nested, _ := d.Headers["nested"].(map[string]any)
	if list, _ := nested["list"].([]any); len(list) != 2 || list[0] != "a" || list[1] != int64(2) {
		t.Errorf("nested = %#v", d.Headers["nested"])
	}
	if d.Properties != pub.Properties {
		t.Errorf("properties\n got %+v\nwant %+v", d.Properties, pub.Properties)
	}
	if string(d.Body) != `{"n":1}` {
		t.Errorf("body = %q", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := d.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("second Ack = %v, want ErrStaleDelivery", err)
	}
}

func TestPublishUnroutable(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	ctx := testCtx(t, 10*time.Second)
	nowhere := name(t, "missing")
	conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: nowhere, Mandatory: true, Body: []byte("x")})
	if err != nil || conf.Routed {
		t.Fatalf("mandatory unroutable = %+v, %v; want Routed false, no error", conf, err)
	}
	conf, err = tr.Publish(ctx, transport.Publishing{RoutingKey: nowhere, Body: []byte("x")})
	if err != nil || !conf.Routed {
		t.Fatalf("non-mandatory = %+v, %v; the broker drops it silently and acks", conf, err)
	}
}

// TestPublishConcurrentCorrelation mixes routed and returned publishes on
// few channels: every return must reach its own publish.
func TestPublishConcurrentCorrelation(t *testing.T) {
	t.Parallel()
	tr := dial(t, WithPublishChannels(2), WithInFlight(64))
	q := declareQueue(t, tr, "q", nil)
	nowhere := name(t, "missing")
	ctx := testCtx(t, 60*time.Second)
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			key, want := q, true
			if i%3 == 0 {
				key, want = nowhere, false
			}
			conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: key, Mandatory: true, Body: []byte("x")})
			if err != nil {
				errs <- err
			} else if conf.Routed != want {
				errs <- fmt.Errorf("publish %d to %s: Routed = %v, want %v", i, key, conf.Routed, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, err := tr.Inspect(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - (n+2)/3; info.Messages != want {
		t.Errorf("queue holds %d, want %d", info.Messages, want)
	}
}

// TestPublishNacked: a nack is ErrNacked, and retires its channel: the
// next publish goes out on a new one, and the old one is closed.
func TestPublishNacked(t *testing.T) {
	t.Parallel()
	tr := dial(t, WithPublishChannels(1))
	ctx := testCtx(t, 10*time.Second)
	full := declareQueue(t, tr, "full", map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"})
	_, err := tr.Publish(ctx, transport.Publishing{RoutingKey: full, Mandatory: true, Body: []byte("x")})
	if !errors.Is(err, transport.ErrNacked) {
		t.Fatalf("Publish to a full reject-publish queue = %v, want ErrNacked", err)
	}
	nacked := tr.pub.slots[0].cur.Load()
	if nacked != nil {
		t.Fatal("the nacked channel is still in the pool")
	}
	q := declareQueue(t, tr, "q", nil)
	if conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true}); err != nil || !conf.Routed {
		t.Fatalf("Publish after = %+v, %v", conf, err)
	}
	if tr.pub.slots[0].cur.Load() == nil {
		t.Fatal("no new channel in the pool")
	}
}

// TestRetiredChannelClosesWhenIdle: a retired channel stays open for the
// publishes still in flight on it, and closes after the last.
func TestRetiredChannelClosesWhenIdle(t *testing.T) {
	t.Parallel()
	tr := dial(t, WithPublishChannels(1))
	ctx := testCtx(t, 10*time.Second)
	s := tr.pub.slots[0]
	c, err := s.get(ctx, tr.publish, 8)
	if err != nil {
		t.Fatal(err)
	}
	c.begin() // a publish in flight
	s.retire(c, tr.pub.closeRetired)
	if c.ch.IsClosed() {
		t.Fatal("closed with a publish in flight")
	}
	if s.cur.Load() != nil {
		t.Fatal("still in the pool")
	}
	c.end(tr.pub.closeRetired)
	if !polltest.Until(polltest.Generous, c.ch.IsClosed) {
		t.Fatal("the retired channel was not closed after its last publish")
	}
}

func TestPublishMissingExchange(t *testing.T) {
	t.Parallel()
	tr := dial(t, WithPublishChannels(1))
	ctx := testCtx(t, 10*time.Second)
	_, err := tr.Publish(ctx, transport.Publishing{Exchange: name(t, "nope"), RoutingKey: "k", Body: []byte("x")})
	if !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Publish to a missing exchange = %v, want ErrNotFound", err)
	}
	// The channel the broker closed is replaced.
	q := declareQueue(t, tr, "q", nil)
	if conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true}); err != nil || !conf.Routed {
		t.Fatalf("Publish after = %+v, %v", conf, err)
	}
}

func TestPublishBadHeaderSendsNothing(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	_, err := tr.Publish(testCtx(t, 5*time.Second), transport.Publishing{RoutingKey: "q", Headers: map[string]any{"bad": struct{}{}}})
	if err == nil || errors.Is(err, transport.ErrUnconfirmed) {
		t.Fatalf("Publish with a bad header = %v, want a plain error", err)
	}
}

func TestPublishCtxDoneIsUnconfirmed(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	ctx := testCtx(t, time.Second)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := tr.Publish(done, transport.Publishing{RoutingKey: "q"})
	if !errors.Is(err, transport.ErrUnconfirmed) {
		t.Fatalf("Publish with ctx done = %v, want ErrUnconfirmed", err)
	}
}

func TestClosedTransport(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	ctx := testCtx(t, time.Second)
	if _, err := tr.Publish(ctx, transport.Publishing{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Publish = %v", err)
	}
	if _, err := tr.Consume(ctx, "q", transport.ConsumeOptions{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Consume = %v", err)
	}
	if err := tr.Declare(ctx, transport.Topology{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Declare = %v", err)
	}
}
