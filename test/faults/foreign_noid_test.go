package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/middleware"
)

// TestFaultForeignMessagesWithoutID: a foreign producer (python3-pika where
// it is installed, else a plain amqp091-go client) publishes messages with
// neither x-acemq-id nor a message-id, each body carrying a business key.
// The server runs middleware.Idempotent, which has each stamped with an id
// before any handler runs (acemq.messages.id.stamped, once per message);
// then, while the handler works through the stamped copies, every
// connection of the vhost is closed by force, twice, so that unacked
// deliveries come back. A redelivery carries its stamped id and is a
// duplicate, not new work: each business key's side effect runs once.
//
// The closes come once every message is stamped. A close between a stamp
// copy's confirm and its original's ack would bring the original back with
// no id, to be stamped again with another (the id is never derived from the
// body, since two distinct messages may have the same one): then
// id.stamped is above the number of messages and that key's work may run
// twice, a window no id-keyed store can close (a close during the stamping
// of 6000 such messages stamped 6002 and did two keys' work twice).
func TestFaultForeignMessagesWithoutID(t *testing.T) {
	t.Parallel()
	const name = "foreign-without-id"
	const n = 100
	url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	pol := testPolicy()
	tr := dial(t, url, log)
	if err := tr.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	// A job's id is the business key, in its body: the messages carry no
	// other.
	js, client := publishForeign(t, url, q, name, n)

	effects := newLedger() // its acceptances are the work done, by business key
	var mu sync.Mutex
	keys := map[string]string{} // the id stamped on a message, to its business key
	var duplicates, redelivered atomic.Int64
	work := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		effects.mu.Lock()
		effects.accepted[j.ID]++
		effects.mu.Unlock()
		time.Sleep(100 * time.Millisecond) // the work is done and not yet acked
		return ack.Accept()
	})
	idem := middleware.Idempotent(idempotency.NewMemory(time.Hour),
		middleware.WithDuplicateHook(func(context.Context, *acemq.Message) { duplicates.Add(1) }))(work)
	var deliveries atomic.Int64
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		deliveries.Add(1)
		if m.Envelope().Redelivered {
			redelivered.Add(1)
		}
		if m.IDIsNew() { // the id made up now is the one stamped on its copy
			var j job
			if err := json.Unmarshal(m.Body(), &j); err == nil {
				mu.Lock()
				keys[m.ID()] = j.ID
				mu.Unlock()
			}
		}
		return idem.ServeMessage(ctx, m)
	})
	mt := newMetrics()
	run := serve(t, tr, q, &acemq.Server{Retry: pol, Concurrency: 2, MeterProvider: mt.provider}, h, log)
	stamped := func() int64 { return mt.counter(t, acemq.MetricIDStamped, map[string]string{"queue": q}) }
	polltest.Within(t, 30*time.Second, "every message is stamped with an id", func() bool { return stamped() == n })
	for i, at := range []int{20, 60} {
		polltest.Within(t, 30*time.Second, fmt.Sprintf("the work was done for %d keys", at), func() bool { return len(effects.acceptedCopy()) >= at })
		brokertest.Ctl(t, "", "close_all_connections", "-p", vh, fmt.Sprintf("acemq faults: forced close %d", i+1))
		polltest.Within(t, 30*time.Second, "the server consumes again", func() bool {
			info, err := tr.Inspect(context.Background(), q)
			return err == nil && info.Consumers > 0
		})
	}
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(effects, js)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	// A redelivery that came back while its first delivery still ran found
	// its id in progress and waits out a retry: let those come round and be
	// taken for the duplicates they are, rather than left queued.
	polltest.Within(t, 60*time.Second, "nothing is left to deliver", func() bool {
		before := deliveries.Load()
		time.Sleep(time.Second)
		return deliveries.Load() == before && depth(url, q) == 0
	})
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	// What is left anywhere is counted by its business key: a stamped copy
	// by the key its id was stamped for, an original by its correlation id.
	tl := sk.collect(t, name, js, effects.acceptedCopy(), pol)
	mu.Lock()
	for _, into := range []*map[string]int{&tl.dlq, &tl.parked, &tl.queued} {
		byKey := map[string]int{}
		for id, c := range *into {
			if k, ok := keys[id]; ok {
				id = k
			}
			byKey[id] += c
		}
		*into = byKey
	}
	mu.Unlock()
	tl.report(t)
	for key, c := range effects.acceptedCopy() {
		if c > 1 {
			t.Errorf("the work for %s was done %d times", key, c)
		}
	}
	if got := stamped(); got != n {
		t.Errorf("%s = %d, want the %d messages without an id", acemq.MetricIDStamped, got, n)
	}
	if redelivered.Load() == 0 {
		t.Error("no delivery came back after the forced closes: the fault missed")
	}
	t.Logf("%s: %d messages from %s without an id, %d stamped; %d redeliveries, %d accepted as duplicates without the work",
		name, n, client, stamped(), redelivered.Load(), duplicates.Load())
}

// publishForeign publishes n messages to queue as a producer that is not
// acemq's: no x-acemq-id, no message-id, a business key prefix-0000... in
// the body (and as the correlation id, for the accounting). It uses
// python3-pika where it is installed, else amqp091-go, and returns the
// jobs (their ids the keys) and which client it used.
func publishForeign(t *testing.T, url, queue, prefix string, n int) ([]job, string) {
	t.Helper()
	js := make([]job, n)
	for i := range js {
		js[i] = job{ID: fmt.Sprintf("%s-%04d", prefix, i)}
	}
	if exec.Command("/usr/bin/python3", "-c", "import pika").Run() == nil {
		out, err := exec.Command("/usr/bin/python3", "testdata/foreign_publisher.py", url, queue, prefix, fmt.Sprint(n)).CombinedOutput()
		if err != nil {
			t.Fatalf("foreign_publisher.py: %v\n%s", err, out)
		}
		return js, "python3-pika"
	}
	if err := raw(url, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		for _, j := range js {
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false, amqp.Publishing{
				ContentType: "application/json", DeliveryMode: amqp.Persistent, CorrelationId: j.ID, Body: body(j),
			})
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
				return fmt.Errorf("%s: not confirmed: %v", j.ID, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return js, "amqp091-go (python3-pika is not installed)"
}
