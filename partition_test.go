package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// The partition of a key is the wire contract's, so that a service in
// another language puts it in the same queue: these are the contract's
// own examples (docs/wire-contract.md, "Partitioned queues (v1)").
func TestPartitionOfIsTheContractsHash(t *testing.T) {
	for _, c := range []struct {
		key          string
		count, index int
	}{
		{"", 4, 1},
		{"a", 4, 0},
		{"customer-42", 4, 2},
		{"order:1001", 4, 1},
		{"order:1001", 3, 2},
		{"ü", 16, 10},
		{"anything", 1, 0},
	} {
		if got := acemq.PartitionOf(c.key, c.count); got != c.index {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", c.key, c.count, got, c.index)
		}
	}
	p := acemq.Partitioned{Queue: "orders", Count: 4}
	if got := p.For("customer-42"); got != "orders.p2" {
		t.Errorf("For(customer-42) = %q, want orders.p2", got)
	}
	if got := strings.Join(p.Queues(), ","); got != "orders.p0,orders.p1,orders.p2,orders.p3" {
		t.Errorf("Queues() = %s", got)
	}
}

// Keys spread evenly enough that four partitions do four queues' work.
func TestPartitionOfSpreadsKeys(t *testing.T) {
	const n, count = 40000, 4
	var per [count]int
	for i := range n {
		per[acemq.PartitionOf(fmt.Sprintf("customer-%d", i), count)]++
	}
	for i, got := range per {
		if got < n/count*9/10 || got > n/count*11/10 {
			t.Errorf("partition %d has %d of %d keys, more than 10%% from an even share: %v", i, got, n, per)
		}
	}
}

func TestPartitionedRefusesAnEmptyOne(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "count of at least 1") {
			t.Fatalf("recover() = %v, want a panic naming the count", r)
		}
	}()
	acemq.Partitioned{Queue: "orders"}.For("k")
}

// One Mux entry serves every partition, each message tells which one it
// came from, and an ordered partitioned queue hands each key's messages to
// the handler in the order they were published, one at a time.
func TestPartitionedQueueKeepsEachKeysOrder(t *testing.T) {
	const keys, perKey, count = 12, 25, 4
	orders := acemq.Partitioned{Queue: "orders", Count: count}
	var (
		mu      sync.Mutex
		seen    = map[string][]int{}
		running = map[int]int{} // handlers running per partition
		wrong   []string
		done    = make(chan struct{})
		total   int
	)
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		p := m.Partition()
		key, seq := m.Header("key").(string), m.Header("seq").(int64)
		mu.Lock()
		running[p.Index]++
		if running[p.Index] > 1 {
			wrong = append(wrong, fmt.Sprintf("two handlers at once on %s", m.Queue()))
		}
		if want := orders.For(key); m.Queue() != want || p.Queue != "orders" || p.Count != count || acemq.PartitionName("orders", p.Index) != want {
			wrong = append(wrong, fmt.Sprintf("key %s came from %s as %+v, want %s", key, m.Queue(), p, want))
		}
		seen[key] = append(seen[key], int(seq))
		mu.Unlock()
		time.Sleep(100 * time.Microsecond) // room for a second handler to overlap, if one could
		mu.Lock()
		running[p.Index]--
		total++
		if total == keys*perKey {
			close(done)
		}
		mu.Unlock()
		return ack.Accept()
	})
	srv := &acemq.Server{Queues: map[string]acemq.QueueConfig{"orders": {Partitions: count, Ordered: true, Prefetch: 16, Args: map[string]any{"x-queue-type": "quorum"}}}}
	f := start(t, srv, map[string]acemq.Handler{"orders": h})
	for q := range count {
		if _, ok := f.broker.Queue(acemq.PartitionName("orders", q)); !ok {
			t.Fatalf("partition %d was not declared", q)
		}
	}
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	for seq := range perKey {
		for k := range keys {
			key := fmt.Sprintf("customer-%d", k)
			_, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: orders.For(key), Body: []byte("{}"),
				Headers: map[string]any{"key": key, "seq": int64(seq)}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("handled %d of %d in 60s", total, keys*perKey)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range wrong {
		t.Error(w)
	}
	for key, seqs := range seen {
		for i, s := range seqs {
			if s != i {
				t.Errorf("key %s handled in the order %v, want 0..%d", key, seqs, perKey-1)
				break
			}
		}
	}
}

// A partition's retries and dead letters stay in the partition: its own
// rungs, its own .dlq.
func TestPartitionedQueueDeadLettersIntoItsOwnPartition(t *testing.T) {
	orders := acemq.Partitioned{Queue: "orders", Count: 3}
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		return ack.Retry(errors.New("payment service down"))
	})
	srv := &acemq.Server{
		Retry:  retry.Fixed(2, time.Second),
		Queues: map[string]acemq.QueueConfig{"orders": {Partitions: 3}},
	}
	f := start(t, srv, map[string]acemq.Handler{"orders": h})
	key := "customer-7"
	f.publish(orders.For(key), "{}", nil)
	f.advance(1, time.Second) // the in-process wait before attempt 2
	dlq := acemq.DeadLetterQueue(orders.For(key))
	got := f.only(dlq)
	if env := acemq.EnvelopeOf(got); env.Attempt != 2 || !strings.Contains(env.Error, "payment service down") {
		t.Errorf("dead letter in %s: attempt %d, reason %q", dlq, env.Attempt, env.Error)
	}
	for _, q := range orders.Queues() {
		if q != orders.For(key) && f.broker.Depth(acemq.DeadLetterQueue(q)) != 0 {
			t.Errorf("%s has a dead letter of another partition", acemq.DeadLetterQueue(q))
		}
	}
}

// Settings a partitioned or ordered queue cannot honour are refused at Run,
// naming what is wrong.
func TestPartitionedSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		queues  []string
		config  acemq.QueueConfig
		wantErr string
	}{
		{"negative count", []string{"orders"}, acemq.QueueConfig{Partitions: -1}, "Partitions -1"},
		{"bindings", []string{"orders"}, acemq.QueueConfig{Partitions: 2, Bindings: []acemq.Binding{{Exchange: "events", Keys: []string{"order.*"}}}}, "copy to every partition"},
		{"ordered with concurrency", []string{"orders"}, acemq.QueueConfig{Ordered: true, Concurrency: 4, Args: map[string]any{"x-queue-type": "quorum"}}, "one handler at a time"},
		{"ordered against args", []string{"orders"}, acemq.QueueConfig{Ordered: true, Args: map[string]any{"x-queue-type": "quorum", "x-single-active-consumer": false}}, "x-single-active-consumer"},
		{"ordered classic", []string{"orders"}, acemq.QueueConfig{Ordered: true}, "Ordered needs a quorum queue"},
		{"a partition served too", []string{"orders", "orders.p1"}, acemq.QueueConfig{Partitions: 2}, `also serves "orders.p1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := memory.New()
			defer b.Close()
			conn := b.Connect()
			defer conn.Close()
			mux := acemq.NewMux()
			for _, q := range c.queues {
				mux.HandleFunc(q, func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
			}
			srv := &acemq.Server{Transport: conn, Handler: mux, Queues: map[string]acemq.QueueConfig{"orders": c.config}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := srv.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Run = %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// Decide answers for a partition with its partitioned queue's settings.
func TestDecideForAPartition(t *testing.T) {
	srv := &acemq.Server{Queues: map[string]acemq.QueueConfig{"orders": {Partitions: 2, Retry: retry.Fixed(3, time.Second)}}}
	v := srv.Decide("orders.p1", acemq.Envelope{Attempt: 1}, ack.Retry(errors.New("later")), time.Now())
	if v.Settle != acemq.SettleCopy || v.Attempt != 2 || v.To != "orders.p1" {
		t.Errorf("Decide(orders.p1) = %+v, want a copy to orders.p1 at attempt 2 (the policy of orders)", v)
	}
	v = srv.Decide("orders.p2", acemq.Envelope{Attempt: 1}, ack.Retry(errors.New("later")), time.Now())
	if v.Settle == acemq.SettleCopy && v.Attempt == 2 {
		t.Errorf("Decide(orders.p2) used the policy of orders, which has only 2 partitions: %+v", v)
	}
}

// What ordering holds is what docs/operators.md says: a retry goes behind
// the messages published after it. Waiting in the process, it holds one
// of the ordered queue's Prefetch slots but not its handler, so the
// messages behind it go ahead meanwhile (at Prefetch 1 they wait for it),
// and its copy then goes to the back of the queue; waiting in the broker
// (a rung, the delay queues), it leaves the queue while the messages
// behind it go ahead.
func TestOrderedRetryOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   retry.Policy
		onRung   bool
		prefetch int
		ahead    int // handlings before the wait ends: m0's first, and the ones that went ahead
		want     string
	}{
		{"in the process", retry.Fixed(2, time.Second), false, 0, 3, "m0@1 m1@1 m2@1 m0@2"},
		{"in the process at prefetch 1", retry.Fixed(2, time.Second), false, 1, 1, "m0@1 m1@1 m2@1 m0@2"},
		{"on a rung", retry.Fixed(2, time.Second).WithBrokerWaitThreshold(time.Second), true, 0, 3, "m0@1 m1@1 m2@1 m0@2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []string
			)
			h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, fmt.Sprintf("%s@%d", m.Body(), m.Attempt()))
				if string(m.Body()) == "m0" && m.Attempt() == 1 {
					return ack.Retry(errors.New("not yet"))
				}
				return ack.Accept()
			})
			srv := &acemq.Server{Retry: c.policy, Queues: map[string]acemq.QueueConfig{"orders": {Partitions: 1, Ordered: true, Prefetch: c.prefetch, Args: map[string]any{"x-queue-type": "quorum"}}}}
			f := start(t, srv, map[string]acemq.Handler{"orders": h})
			p := acemq.Partitioned{Queue: "orders", Count: 1}
			for _, body := range []string{"m0", "m1", "m2"} {
				f.publish(p.For("k"), body, nil)
			}
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
			if rung := retry.RungName(p.For("k"), time.Second); c.onRung {
				f.eventually("m0 on its rung, m1 and m2 handled", func() bool { return f.broker.Depth(rung) == 1 && count() == 3 })
				f.broker.Clock().Advance(time.Second) // the rung's TTL
			} else {
				f.eventually(fmt.Sprintf("%d handled while m0 waits in the process", c.ahead), func() bool { return count() == c.ahead })
				f.advance(1, time.Second) // m0's wait in the process
			}
			f.eventually("all four handlings", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 4 })
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(got, " ") != c.want {
				t.Errorf("handled %s, want %s", strings.Join(got, " "), c.want)
			}
		})
	}
}

// A message delayed to a partition (Outgoing.Delay to Partitioned.For)
// arrives in that partition when due: each partition is bound to the delay
// queues as any queue a server consumes.
func TestPartitionDelayedPublish(t *testing.T) {
	orders := acemq.Partitioned{Queue: "orders", Count: 3}
	got := make(chan acemq.Partition, 1)
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		got <- m.Partition()
		return ack.Accept()
	})
	f := start(t, &acemq.Server{Queues: map[string]acemq.QueueConfig{"orders": {Partitions: orders.Count}}}, map[string]acemq.Handler{"orders": h})
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: orders.For("customer-42"), Body: []byte("{}"), Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the message waits on a level", func() bool { return onLevel(f.broker) != "" })
	f.broker.Clock().Advance(time.Minute)
	select {
	case p := <-got:
		if p != (acemq.Partition{Queue: "orders", Index: acemq.PartitionOf("customer-42", 3), Count: 3}) {
			t.Errorf("arrived from %+v", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the delayed message did not arrive in 30s after its due time")
	}
}
