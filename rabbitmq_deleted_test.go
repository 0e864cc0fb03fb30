package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// TestRabbitQueueDeletedUnderALongHandler: on RabbitMQ, a queue deleted
// while its handler runs a long job is declared again at once (its rung
// and dead-letter routes with it), not once the job ends; a message
// published meanwhile waits in it and is handled once the job returns,
// the queue's concurrency of one kept. The long job's own delivery went
// with the deleted queue: its ack fails, and RabbitMQ does not deliver it
// again (what a queue held when deleted is lost to it, as operators are
// told).
func TestRabbitQueueDeletedUnderALongHandler(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	release := make(chan struct{})
	var calls, running, most atomic.Int64
	r.serve(r.tr, q, &acemq.Server{Queues: map[string]acemq.QueueConfig{q: {Concurrency: 1}}},
		acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			calls.Add(1)
			if n := running.Add(1); n > most.Load() {
				most.Store(n)
			}
			defer running.Add(-1)
			if string(m.Body()) == "long" {
				<-release
			}
			return ack.Accept()
		}))
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	r.publish(q, "long")
	r.eventually("the long job started", func() bool { return calls.Load() == 1 })
	if _, err := r.admin.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	r.eventually(q+" declared again while the long job runs", func() bool { return r.depth(q) == 0 })
	r.publish(q, "short") // mandatory: fails if no queue took it
	r.eventually("the short message waiting in the queue", func() bool { return r.depth(q) == 1 })
	if n := calls.Load(); n != 1 {
		t.Errorf("%d handler calls while the long job runs, want 1", n)
	}
	close(release)
	released = true
	r.eventually("the short message handled", func() bool { return calls.Load() == 2 && r.depth(q) == 0 })
	if m := most.Load(); m != 1 {
		t.Errorf("%d handlers at once, want 1", m)
	}
}
