package acemq_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/brokertest"
)

// foreignPartitionPublisher is python3-pika publishing keyed messages to a
// partitioned queue from docs/wire-contract.md alone ("Partitioned queues
// (v1)"): FNV-1a of the key, modulo the count, names the partition. It
// publishes argv[4] messages for each of argv[3] keys, confirmed and
// mandatory, with the key and a per-key sequence number in headers, and
// no x-acemq header at all: the library gives them ids.
const foreignPartitionPublisher = `
import sys
import pika
url, queue, keys, per, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def fnv1a32(b):
    h = 0x811c9dc5
    for c in b:
        h ^= c
        h = (h * 0x01000193) & 0xffffffff
    return h
conn = pika.BlockingConnection(pika.URLParameters(url))
ch = conn.channel()
ch.confirm_delivery()
for seq in range(per):
    for k in range(keys):
        key = "py-%d" % k
        part = fnv1a32(key.encode("utf-8")) % count
        ch.basic_publish(exchange="", routing_key="%s.p%d" % (queue, part), body=b"{}", mandatory=True,
                         properties=pika.BasicProperties(delivery_mode=2, headers={"key": key, "seq": seq}))
conn.close()
`

// orderBook records, per key, the sequence numbers a handler saw first
// (a redelivered duplicate is counted, not recorded again), and which
// server handled them.
type orderBook struct {
	mu    sync.Mutex
	seen  map[string][]int
	ids   map[string]bool
	by    map[string]int
	dups  int
	wrong []string
}

func newOrderBook() *orderBook {
	return &orderBook{seen: map[string][]int{}, ids: map[string]bool{}, by: map[string]int{}}
}

func (b *orderBook) handler(server string, p acemq.Partitioned) acemq.Handler {
	return acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		key, _ := m.Header("key").(string)
		seq, err := strconv.Atoi(fmt.Sprint(m.Header("seq")))
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case err != nil:
			b.wrong = append(b.wrong, fmt.Sprintf("seq %v: %v", m.Header("seq"), err))
		case m.Queue() != p.For(key) || m.Partition().Queue != p.Queue:
			b.wrong = append(b.wrong, fmt.Sprintf("key %s came from %s (%+v), want %s", key, m.Queue(), m.Partition(), p.For(key)))
		}
		if b.ids[m.ID()] {
			b.dups++
			return ack.Accept()
		}
		b.ids[m.ID()] = true
		b.seen[key] = append(b.seen[key], seq)
		b.by[server]++
		return ack.Accept()
	})
}

func (b *orderBook) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ids)
}

func (b *orderBook) handledBy(server string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.by[server]
}

// check fails the test for anything recorded wrong and any key whose
// messages were first handled out of their published order.
func (b *orderBook) check(t *testing.T, keys, perKey int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.wrong {
		t.Error(w)
	}
	if len(b.seen) != keys {
		t.Errorf("%d keys handled, want %d", len(b.seen), keys)
	}
	for key, seqs := range b.seen {
		if len(seqs) != perKey {
			t.Errorf("key %s: %d messages handled, want %d", key, len(seqs), perKey)
		}
		for i, s := range seqs {
			if s != i {
				t.Errorf("key %s handled in the order %v", key, seqs)
				break
			}
		}
	}
}

func partitionedQuorum(count int) acemq.QueueConfig {
	return acemq.QueueConfig{Partitions: count, Ordered: true, Prefetch: 20,
		Args: map[string]any{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced"}}
}

// A Python service publishing to a partitioned queue by the contract's
// hash reaches the partition the library would choose, and an ordered
// partitioned quorum queue hands every key's messages over in order.
func TestRabbitMQPartitionedForeignPublisher(t *testing.T) {
	const keys, perKey, count = 16, 15, 4
	r := newRabbit(t)
	q := r.queue()
	p := acemq.Partitioned{Queue: q, Count: count}
	book := newOrderBook()
	mux := acemq.NewMux()
	mux.Handle(q, book.handler("a", p))
	r.serveMux(r.tr, &acemq.Server{Handler: mux, Queues: map[string]acemq.QueueConfig{q: partitionedQuorum(count)}})
	cmd := exec.Command("/usr/bin/python3", "-c", foreignPartitionPublisher, brokertest.SharedURL(t), q,
		strconv.Itoa(keys), strconv.Itoa(perKey), strconv.Itoa(count))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Python publisher: %v: %s", err, stderr.String())
	}
	r.eventually(fmt.Sprintf("%d messages handled", keys*perKey), func() bool { return book.count() == keys*perKey })
	book.check(t, keys, perKey)
}

// Two servers on one ordered partitioned queue: the broker makes one
// consumer active per partition, the other waits; when the active server
// shuts down the other takes over, and every key's order holds across the
// change.
func TestRabbitMQOrderedPartitionsFailOver(t *testing.T) {
	const keys, perKey, count = 8, 10, 2
	r := newRabbit(t)
	q := r.queue()
	p := acemq.Partitioned{Queue: q, Count: count}
	book := newOrderBook()
	first := &acemq.Server{Handler: muxFor(q, book.handler("first", p)), Queues: map[string]acemq.QueueConfig{q: partitionedQuorum(count)}}
	r.serveMux(r.tr, first)
	second := &acemq.Server{Handler: muxFor(q, book.handler("second", p)), Queues: map[string]acemq.QueueConfig{q: partitionedQuorum(count)}}
	r.serveMux(dialRabbit(t, r.url), second)

	pub := &acemq.Publisher{Transport: r.tr, Mandatory: true}
	send := func(from, to int) {
		t.Helper()
		for seq := from; seq < to; seq++ {
			for k := range keys {
				key := fmt.Sprintf("k-%d", k)
				if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: p.For(key), Body: []byte("{}"),
					Headers: map[string]any{"key": key, "seq": int64(seq)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	send(0, perKey/2)
	r.eventually("the first half handled", func() bool { return book.count() == keys*perKey/2 })
	if n := book.handledBy("second"); n != 0 {
		t.Fatalf("the second server handled %d messages while the first was active: single active consumer did not hold", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	send(perKey/2, perKey)
	r.eventually("the second half handled", func() bool { return book.count() == keys*perKey })
	if n := book.handledBy("second"); n != keys*perKey/2 {
		t.Errorf("the second server handled %d messages after the first went, want %d", n, keys*perKey/2)
	}
	book.check(t, keys, perKey)
}

func muxFor(queue string, h acemq.Handler) *acemq.Mux {
	mux := acemq.NewMux()
	mux.Handle(queue, h)
	return mux
}

// An ordered partition takes up to its Prefetch from the broker while its
// one handler works, not one delivery at a time: the server tells the
// transport the queue is single-active-consumer, so it skips the
// probation, whose second consumer would wait behind every other and
// never be active.
func TestRabbitMQOrderedPartitionPrefetches(t *testing.T) {
	const prefetch, sent = 4, 6
	r := newRabbit(t)
	q := r.queue()
	p := acemq.Partitioned{Queue: q, Count: 1}
	started, release := make(chan struct{}, sent), make(chan struct{})
	var handled sync.WaitGroup
	handled.Add(sent)
	h := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		started <- struct{}{}
		<-release
		handled.Done()
		return ack.Accept()
	})
	cfg := partitionedQuorum(1)
	cfg.Prefetch = prefetch
	r.serveMux(r.tr, &acemq.Server{Handler: muxFor(q, h), Queues: map[string]acemq.QueueConfig{q: cfg}})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the server's shutdown, should the test fail
	for i := range sent {
		r.publish(p.For("k"), fmt.Sprint("m", i))
	}
	<-started
	r.eventually(fmt.Sprintf("%d of %d held by the consumer (the prefetch)", prefetch, sent), func() bool {
		return r.depth(p.For("k")) == sent-prefetch
	})
	free()
	handled.Wait()
}
