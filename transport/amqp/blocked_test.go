package rabbitmq

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestBlockedPublishFailsFast raises a memory alarm on the private node:
// publishing fails at once with ErrBlocked while acks on the consume
// connection still go through.
func TestBlockedPublishFailsFast(t *testing.T) {
	node := privateNode(t)
	tr := dialURL(t, node.URL)
	ctx := testCtx(t, 60*time.Second)
	q := name(t, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, tr, q, 0, 5)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })

	rabbitmqctl(t, node.Name, "set_vm_memory_high_watermark", "0")
	t.Cleanup(func() { rabbitmqctl(t, node.Name, "set_vm_memory_high_watermark", "0.4") })
	// The alarm takes effect within a moment, and the broker blocks a
	// connection when it next publishes: keep publishing until it does.
	polltest.Within(t, 15*time.Second, "the publish connection is reported blocked", func() bool {
		if _, blocked := tr.publish.Blocked(); blocked {
			return true
		}
		pctx := testCtx(t, 300*time.Millisecond)
		if _, err := tr.Publish(pctx, transport.Publishing{RoutingKey: q}); err != nil &&
			!errors.Is(err, transport.ErrUnconfirmed) && !errors.Is(err, transport.ErrBlocked) {
			t.Fatalf("Publish under the alarm: %v", err)
		}
		return false
	})
	start := time.Now()
	_, err = tr.Publish(ctx, transport.Publishing{RoutingKey: q})
	// At once: the alternative waits for the alarm to clear, for ever; 2 s
	// is far below that and above what a busy machine takes.
	if !errors.Is(err, transport.ErrBlocked) || time.Since(start) > 2*time.Second {
		t.Fatalf("Publish while blocked = %v after %s, want ErrBlocked at once", err, time.Since(start))
	}
	for i := range 5 {
		d := receive(t, sub, 5*time.Second)
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack %d while the publish connection is blocked: %v", i, err)
		}
	}
	if info, err := tr.Inspect(ctx, q); err != nil || info.Messages != 0 {
		t.Fatalf("Inspect while blocked = %+v, %v", info, err)
	}

	rabbitmqctl(t, node.Name, "set_vm_memory_high_watermark", "0.4")
	if !polltest.Until(50*time.Second, func() bool {
		var conf transport.Confirmation
		conf, err = tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true})
		return err == nil && conf.Routed
	}) {
		t.Fatalf("never unblocked: %v", err)
	}
}

func TestDialErrorHidesPassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wr0ngpassw0rd")
	bad := u.String()
	unreachable := "amqp://user:s3cretpw@127.0.0.1:1/"
	ctx := testCtx(t, 20*time.Second)
	_, err = Dial(ctx, bad, WithURLs(unreachable), WithDialTimeout(5*time.Second))
	if err == nil {
		t.Fatal("Dial with a wrong password succeeded")
	}
	for _, pw := range []string{"wr0ngpassw0rd", "s3cretpw"} {
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("password %q in %q", pw, err)
		}
	}
	if !errors.Is(err, amqp.ErrCredentials) {
		t.Errorf("the cause must stay reachable: errors.Is(%v, amqp.ErrCredentials) is false", err)
	}
	if !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("the error should name the redacted URLs: %v", err)
	}
}
