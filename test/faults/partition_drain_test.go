package faults_test

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
)

// Accounting for a single-active-consumer quorum queue, which refuses
// basic.get (405 RESOURCE_LOCKED, "basic.get operations are not supported
// by quorum queues with single active consumer"): what it still holds is
// taken by a consumer of its own, once the servers have stopped.

// drainConsuming takes every ready message from queue with a consumer and
// returns how many of each id it held. It reads as many as the queue
// counted ready when it began, waiting up to 30 s for them; the servers
// must have stopped, or the broker may make one of theirs the active
// consumer instead.
func drainConsuming(tb testing.TB, url, queue string) map[string]int {
	tb.Helper()
	got := map[string]int{}
	err := raw(url, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages == 0 {
			return nil
		}
		if err := ch.Qos(64, 0, false); err != nil {
			return err
		}
		ds, err := ch.Consume(queue, "acemq-faults-drain", false, false, false, false, nil)
		if err != nil {
			return err
		}
		deadline := time.After(30 * time.Second)
		for n := 0; n < q.Messages; n++ {
			select {
			case d, ok := <-ds:
				if !ok {
					return fmt.Errorf("the consumer of %s was closed after %d of %d messages", queue, n, q.Messages)
				}
				got[deliveryID(d)]++
				if err := d.Ack(false); err != nil {
					return err
				}
			case <-deadline:
				return fmt.Errorf("%s counted %d messages ready, and a consumer got %d within 30s", queue, q.Messages, n)
			}
		}
		return ch.Cancel("acemq-faults-drain", false)
	})
	if err != nil {
		tb.Fatalf("drain %s: %v", queue, err)
	}
	return got
}

// collectPartition is sink.collect for a single-active-consumer partition
// whose retries wait in the process (no rungs): the .dlq and .parked left
// into the sink's counts, the partition itself taken by drainConsuming.
func (s *sink) collectPartition(tb testing.TB, name string, published []job, accepted map[string]int) *tally {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	addAll(s.dlq, drain(tb, s.url, acemq.DeadLetterQueue(s.queue)))
	addAll(s.parked, drain(tb, s.url, acemq.ParkedQueue(s.queue)))
	queued := drainConsuming(tb, s.url, s.queue)
	return &tally{name: name, published: published, accepted: accepted, dlq: s.dlq, parked: s.parked, queued: queued}
}
