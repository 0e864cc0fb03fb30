package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// observed dials with a logger whose entries the test reads, to see that
// the publish connection was never lost.
func observed(tb testing.TB) (*Transport, *observer.ObservedLogs) {
	tb.Helper()
	core, logs := observer.New(zap.InfoLevel)
	return dial(tb, WithLogger(zap.New(core))), logs
}

// noReconnect checks that tr's connections are the first ones.
func noReconnect(tb testing.TB, tr *Transport, logs *observer.ObservedLogs) {
	tb.Helper()
	if g := tr.publish.Generation(); g != 1 {
		tb.Errorf("the publish connection is number %d, want 1: it was lost", g)
	}
	if lost := logs.FilterMessage("acemq: connection lost, reconnecting"); lost.Len() > 0 {
		tb.Errorf("connection lost: %v", lost.All()[0].ContextMap())
	}
}

// concurrently runs f(i) for i in [0, n) all at once and waits for them.
func concurrently(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// wantLimit checks that err is ErrTooLarge, a *transport.LimitError for
// field, and says where the publish was going.
func wantLimit(tb testing.TB, err error, field, dest string) *transport.LimitError {
	tb.Helper()
	var le *transport.LimitError
	if !errors.As(err, &le) || !errors.Is(err, transport.ErrTooLarge) {
		tb.Fatalf("error %v, want a *transport.LimitError for %s", err, field)
	}
	if le.Field != field {
		tb.Errorf("LimitError.Field %q, want %q", le.Field, field)
	}
	if !strings.Contains(err.Error(), dest) {
		tb.Errorf("error %q does not name %s", err, dest)
	}
	return le
}

// waitDepth waits until queue holds n ready messages.
func waitDepth(tb testing.TB, tr *Transport, queue string, n int) {
	tb.Helper()
	var info transport.QueueInfo
	var err error
	if !polltest.Until(polltest.Generous, func() bool {
		info, err = tr.Inspect(testCtx(tb, 5*time.Second), queue)
		return err == nil && info.Messages == n
	}) {
		tb.Fatalf("queue %s: %+v, %v; want %d messages", queue, info, err, n)
	}
}

// alone publishes n messages at once through one Transport to a new
// queue, the ith with publish, and checks that all but bad went through
// and reached the queue, that bad failed alone with a LimitError for
// field, and that the publish connection was never lost.
func alone(t *testing.T, n, bad int, field string, publish func(ctx context.Context, tr *Transport, q string, i int) error) *transport.LimitError {
	t.Helper()
	tr, logs := observed(t)
	q := declareQueue(t, tr, "q", nil)
	ctx := testCtx(t, 30*time.Second)
	errs := make([]error, n)
	concurrently(n, func(i int) { errs[i] = publish(ctx, tr, q, i) })
	var le *transport.LimitError
	for i, err := range errs {
		if i == bad {
			le = wantLimit(t, err, field, q)
		} else if err != nil {
			t.Errorf("innocent publish %d: %v", i, err)
		}
	}
	waitDepth(t, tr, q, n-1)
	noReconnect(t, tr, logs)
	return le
}

// TestOverlongPublishHarmsNoOther is issue 15's: of 200 publishes at once
// on one Transport, one carries a message-id of 300 bytes. amqp091-go
// would fail it after writing basic.publish and the publish connection
// would die with the others in flight; refused first, it fails alone.
func TestOverlongPublishHarmsNoOther(t *testing.T) {
	t.Parallel()
	const bad = 117
	le := alone(t, 200, bad, "message-id", func(ctx context.Context, tr *Transport, q string, i int) error {
		p := transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte{byte(i)},
			Properties: transport.Properties{DeliveryMode: 2, MessageID: fmt.Sprint("m-", i)}}
		if i == bad {
			p.MessageID = strings.Repeat("m", 300)
		}
		conf, err := tr.Publish(ctx, p)
		if err == nil && !conf.Routed {
			err = errors.New("not routed")
		}
		return err
	})
	if le.Size != 300 || le.Limit != 255 {
		t.Errorf("LimitError %+v, want 300 over 255", *le)
	}
}

// TestPublisherOverlongHarmsNoOther: the same through acemq.Publisher. An
// id of 300 bytes travels in x-acemq-id alone; a correlation id of 300 is
// a *acemq.PublishError that is ErrTooLarge, and no other fails.
func TestPublisherOverlongHarmsNoOther(t *testing.T) {
	t.Parallel()
	const longID, longCorrelation = 31, 117
	alone(t, 200, longCorrelation, "correlation-id", func(ctx context.Context, tr *Transport, q string, i int) error {
		o := acemq.Outgoing{RoutingKey: q, Body: []byte{byte(i)}, ID: fmt.Sprint("id-", i)}
		switch i {
		case longID:
			o.ID = strings.Repeat("i", 300)
		case longCorrelation:
			o.CorrelationID = strings.Repeat("c", 300)
		}
		_, err := (&acemq.Publisher{Transport: tr, Mandatory: true}).Publish(ctx, o)
		var pe *acemq.PublishError
		if err != nil && (!errors.As(err, &pe) || pe.RoutingKey != q) {
			t.Errorf("publish %d: %v, want a *acemq.PublishError", i, err)
		}
		return err
	})
}

// TestHeaderLimitExact: a mandatory publish (which carries the
// transport's own x-acemq-publish-seq) whose content header is exactly
// amqplimit.HeaderLimit of the negotiated frame is sent; one byte more is
// refused, naming the limit, and the connection goes on.
func TestHeaderLimitExact(t *testing.T) {
	t.Parallel()
	tr, logs := observed(t)
	q := declareQueue(t, tr, "q", nil)
	ctx := testCtx(t, 30*time.Second)
	props := transport.Properties{DeliveryMode: 2, MessageID: "m", ContentType: "text/plain"}
	frameMax := amqplimit.DefaultFrameMax // RabbitMQ's default, which the test broker keeps
	base, err := amqplimit.Measure(&props, amqp.Table{"pad": "", seqHeader: int64(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(extra int) error {
		pad := strings.Repeat("p", amqplimit.HeaderLimit(frameMax)-base+extra)
		_, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true,
			Headers: map[string]any{"pad": pad}, Properties: props})
		return err
	}
	if err := publish(0); err != nil {
		t.Fatalf("publish at the limit: %v", err)
	}
	le := wantLimit(t, publish(1), "headers", q)
	if le.Size != amqplimit.HeaderLimit(frameMax)+1 || le.Limit != amqplimit.HeaderLimit(frameMax) {
		t.Errorf("LimitError %+v, want %d over %d", *le, amqplimit.HeaderLimit(frameMax)+1, amqplimit.HeaderLimit(frameMax))
	}
	d := getOne(t, tr, q)
	if pad, _ := d.Headers["pad"].(string); len(pad) != amqplimit.HeaderLimit(frameMax)-base {
		t.Errorf("read back a pad of %d bytes", len(pad))
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	noReconnect(t, tr, logs)
}

// TestMeasureAsSent: headers as a caller gives them measure as toTable
// converts them for amqp091-go, so that the memory transport, which
// measures them as given, refuses what this transport refuses.
func TestMeasureAsSent(t *testing.T) {
	t.Parallel()
	h := map[string]any{
		"int": 1, "bigint": 1 << 40, "u8": uint8(1), "u16": uint16(1), "u32": uint32(1), "u64": uint64(1),
		"strings": []string{"a", "bc"}, "nested": map[string]any{"n": []any{1, map[string]any{"x": uint(2)}}},
		"decimal": amqp.Decimal{Scale: 1, Value: 5}, "time": time.Unix(1, 0), "nil": nil,
	}
	table, err := toTable(h)
	if err != nil {
		t.Fatal(err)
	}
	p := &transport.Publishing{}
	given, err := amqplimit.Measure(&p.Properties, h, decimalSize)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := measure(p, table)
	if err != nil || given != sent {
		t.Errorf("measured %d as given, %d, %v as sent", given, sent, err)
	}
}

// TestLimitsBeforeAnything: what breaks a limit is refused before the
// publisher takes a place in its window or a channel: one that has
// neither refuses it at once.
func TestLimitsBeforeAnything(t *testing.T) {
	t.Parallel()
	s := strings.Repeat
	for _, tt := range []struct {
		field string
		p     transport.Publishing
	}{
		{"message-id", transport.Publishing{Properties: transport.Properties{MessageID: s("m", 256)}}},
		{"type", transport.Publishing{Properties: transport.Properties{Type: s("t", 256)}}},
		{s("k", 256), transport.Publishing{Headers: map[string]any{s("k", 256): 1}}},
		{"header-depth", transport.Publishing{Headers: map[string]any{"d": nestTables(33)}}},
		{"header-entries", transport.Publishing{Headers: map[string]any{"a": make([]any, 8193)}}},
	} {
		pub := &publisher{conn: &amqpconn.Conn{}} // never dialled, no window
		_, err := pub.publish(testCtx(t, time.Second), &tt.p)
		wantLimit(t, err, tt.field, "queue")
	}
}

func nestTables(depth int) any {
	var v any = "leaf"
	for range depth {
		v = map[string]any{"n": v}
	}
	return v
}

// BenchmarkLimits is the check alone on a message as the server publishes
// it, converted as Publish converts it.
//
//	go test -run '^$' -bench Limits -benchmem ./transport/amqp
func BenchmarkLimits(b *testing.B) {
	p := &transport.Publishing{RoutingKey: "orders", Mandatory: true,
		Properties: transport.Properties{ContentType: "application/json", DeliveryMode: 2,
			MessageID: "01HZX3Q9J6Y8K2W4M5N7P0R1S3", Timestamp: time.Unix(1700000000, 0)},
		Headers: map[string]any{"x-acemq-id": "01HZX3Q9J6Y8K2W4M5N7P0R1S3", "x-acemq-attempt": int64(1),
			"x-acemq-created": int64(1700000000123), "x-acemq-exchange": "", "x-acemq-routing-key": "orders",
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	table, err := toTable(p.Headers)
	if err != nil {
		b.Fatal(err)
	}
	table[seqHeader] = int64(1)
	c := &confirmCh{frameMax: amqplimit.DefaultFrameMax}
	b.ReportAllocs()
	for b.Loop() {
		size, err := measure(p, table)
		if err == nil {
			err = fit(p, size, c)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
