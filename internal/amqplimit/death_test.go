package amqplimit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// TestDeathMargin dead-letters, on RabbitMQ, a message whose content
// header is as large as Fit lets through, at the longest names and as the
// server's retries meet it: published through the default exchange to a
// rung of 255 bytes, it expires into a queue of 246 (the rung's name is
// the queue's with ".retry.1s"), whose consumer rejects it into the
// dead-letter exchange. After both deaths amqp091-go still reads it. The
// same message at the frame size itself, which RabbitMQ takes, cannot be
// read after one death: the reader closes the connection (501).
func TestDeathMargin(t *testing.T) {
	url := brokertest.SharedURL(t)
	conn := dialRaw(t, url)
	ch := channel(t, conn)
	frameMax := conn.Config.FrameSize

	id := randomHex(t, 4)
	q := "amqplimit." + id + "." + strings.Repeat("q", 246-len("amqplimit..")-len(id))
	rung := q + ".retry.1s"
	dlq := "amqplimit." + id + ".dlq"
	retryX, dlx := "retry."+id[:5], "dlx."+id[:5] // as long as acemq.retry and acemq.dlx
	for _, x := range []string{retryX, dlx} {
		if err := ch.ExchangeDeclare(x, "direct", false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct {
		name string
		args amqp.Table
	}{
		{rung, amqp.Table{"x-message-ttl": int32(1), "x-dead-letter-exchange": retryX, "x-dead-letter-routing-key": q}},
		{q, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlq}},
		{dlq, nil},
	} {
		// Exclusive: gone with the connection.
		if _, err := ch.QueueDeclare(d.name, false, false, true, false, d.args); err != nil {
			t.Fatalf("declare %s: %v", d.name, err)
		}
	}
	if err := ch.QueueBind(q, q, retryX, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(dlq, dlq, dlx, false, nil); err != nil {
		t.Fatal(err)
	}

	sent := padded(t, amqp.Table{"x-acemq-id": id}, HeaderLimit(frameMax))
	if err := ch.Publish("", rung, false, false, amqp.Publishing{Headers: sent, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	expired, err := get(ch, q)
	if err != nil {
		t.Fatalf("read after a rung's expiry: %v", err)
	}
	if err := expired.Reject(false); err != nil {
		t.Fatal(err)
	}
	rejected, err := get(ch, dlq)
	if err != nil {
		t.Fatalf("read after a rung's expiry and a rejection: %v", err)
	}
	_ = rejected.Ack(false)

	once := tableBytes(t, expired.Headers) - tableBytes(t, sent)
	twice := tableBytes(t, rejected.Headers) - tableBytes(t, sent)
	deaths, _ := rejected.Headers["x-death"].([]any)
	if len(deaths) != 2 {
		t.Fatalf("x-death has %d entries, want 2", len(deaths))
	}
	for i, d := range deaths {
		t.Logf("x-death entry %d: %d bytes", i, valueBytes(t, d))
	}
	t.Logf("a rung's expiry adds %d bytes; a rejection after it %d more, %d in all (DeathMargin %d)",
		once, twice-once, twice, DeathMargin)
	if twice > DeathMargin {
		t.Errorf("two deaths add %d bytes, more than DeathMargin (%d)", twice, DeathMargin)
	}

	// Without the margin: RabbitMQ takes a header of the whole frame, and
	// sends it on grown by the death, in a frame too large to be read.
	conn2 := dialRaw(t, url)
	ch2 := channel(t, conn2)
	q2, dlq2 := "amqplimit."+id+".full", "amqplimit."+id+".full.dlq"
	if _, err := ch2.QueueDeclare(dlq2, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.QueueDeclare(q2, false, true, false, false,
		amqp.Table{"x-message-ttl": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq2}); err != nil {
		t.Fatal(err)
	}
	full := padded(t, amqp.Table{"x-acemq-id": id}, frameMax-FrameOverhead)
	if err := ch2.Publish("", q2, false, false, amqp.Publishing{Headers: full, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var e *amqp.Error
	if _, err := get(ch2, dlq2); !errors.As(err, &e) || e.Code != amqp.FrameError || !conn2.IsClosed() {
		t.Fatalf("read of a full header after a death: %v, connection closed %v; want a 501 that closes it", err, conn2.IsClosed())
	}
	deleteQueues(t, url, q2, dlq2)
}

// padded adds a header "pad" to h that makes the content header of a
// publish with no properties size bytes.
func padded(tb testing.TB, h amqp.Table, size int) amqp.Table {
	tb.Helper()
	h["pad"] = ""
	base, err := Measure(&transport.Properties{}, h, nil)
	if err != nil {
		tb.Fatal(err)
	}
	h["pad"] = strings.Repeat("p", size-base)
	if n, _ := Measure(&transport.Properties{}, h, nil); n != size {
		tb.Fatalf("padded to %d bytes, want %d", n, size)
	}
	return h
}

func dialRaw(tb testing.TB, url string) *amqp.Connection {
	tb.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

func channel(tb testing.TB, conn *amqp.Connection) *amqp.Channel {
	tb.Helper()
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	return ch
}

// deleteQueues deletes queues on a connection of its own.
func deleteQueues(tb testing.TB, url string, queues ...string) {
	tb.Helper()
	ch := channel(tb, dialRaw(tb, url))
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			tb.Errorf("delete %s: %v", q, err)
		}
	}
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// get waits for one message on queue.
func get(ch *amqp.Channel, queue string) (amqp.Delivery, error) {
	var d amqp.Delivery
	var ok bool
	var err error
	if !polltest.Until(polltest.Generous, func() bool {
		d, ok, err = ch.Get(queue, false)
		return err != nil || ok
	}) {
		return d, errors.New("nothing in " + queue)
	}
	return d, err
}

// tableBytes is the encoded size of h as the headers table.
func tableBytes(tb testing.TB, h amqp.Table) int {
	tb.Helper()
	n, err := Measure(&transport.Properties{}, h, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return n - headerFixed
}

// valueBytes is the encoded size of one field value, type octet included.
func valueBytes(tb testing.TB, v any) int {
	tb.Helper()
	return tableBytes(tb, amqp.Table{"": v}) - 4 - 1
}
