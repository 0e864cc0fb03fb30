package soak_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// inject does the fault of st on the broker now.
func (w *rabbitWorld) inject(st step) {
	w.t.Helper()
	switch st.fault {
	case "connections-closed":
		// The broker's connection.close (320 CONNECTION_FORCED) to every
		// connection of the vhost: the server's and the publisher's.
		w.node.Ctl(w.t, "close_all_connections", "-p", w.vh, "acemq soak: connections closed")
	case "blocked":
		w.block(st.n)
	case "queue-deleted":
		w.deleteQueue(st.target)
	case "restart":
		w.stop()
		w.start()
	default:
		w.t.Fatalf("soak: no RabbitMQ operation for fault %q", st.fault)
	}
}

// block sets the node's memory alarm (set_vm_memory_high_watermark 0),
// which blocks every connection that publishes, the server's and the
// publisher's, while the server goes on consuming and acking on a
// connection of its own. Where the memory run refuses the next n
// publishes, the alarm stays on for about the time n publishes of the
// schedule take (n mean intervals, scaled; at least as long as rabbitmqctl
// takes to clear it), cleared from a goroutine of its own so that the
// schedule's publishes meet it; a second alarm meanwhile lengthens it.
func (w *rabbitWorld) block(n int) {
	w.t.Helper()
	until := time.Now().Add(time.Duration(n) * (*intervalFlag) / w.scale)
	w.mu.Lock()
	on := w.alarmOn
	w.alarmOn, w.unblockAt = true, later(w.unblockAt, until)
	w.mu.Unlock()
	if on {
		return
	}
	w.node.Ctl(w.t, "set_vm_memory_high_watermark", "0")
	w.alarm.Go(func() {
		for {
			w.mu.Lock()
			at := w.unblockAt
			w.mu.Unlock()
			if time.Now().Before(at) {
				time.Sleep(time.Until(at))
				continue
			}
			out, err := exec.Command("rabbitmqctl", "-q", "-n", w.node.Name, "set_vm_memory_high_watermark", "0.4").CombinedOutput()
			w.mu.Lock()
			w.alarmOn = false
			if err != nil {
				w.alarmErr = fmt.Errorf("clear the memory alarm: %v: %s", err, strings.TrimSpace(string(out)))
			}
			w.mu.Unlock()
			return
		}
	})
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// unblock waits until the memory alarm is cleared.
func (w *rabbitWorld) unblock() {
	w.t.Helper()
	w.alarm.Wait()
	w.mu.Lock()
	err := w.alarmErr
	w.mu.Unlock()
	if err != nil {
		w.t.Fatalf("soak: %v", err)
	}
}

// deleteQueue deletes q from a connection of its own, as an operator
// does, marks what it may take as destroyed (the ids of q not ended yet:
// those that end after all are not), and waits until the server has
// declared q again: the engine does it once every worker of the cancelled
// subscription returned (supervise's alive.Wait), so a retry waiting in
// the process or a handler asleep keeps q deleted meanwhile, and a
// publish to it unroutable.
func (w *rabbitWorld) deleteQueue(q string) {
	w.t.Helper()
	d := deletion{queue: q, prefetch: rabbitPrefetch}
	if q == classicQueue {
		for _, r := range w.classic.BrokerRungs() {
			info, err := w.pubTr.Inspect(context.Background(), retry.RungName(q, r))
			if err == nil {
				d.rungs += info.Messages
			}
		}
	}
	w.l.mu.Lock()
	for _, id := range w.l.published {
		if w.l.queue[id] == q && w.l.handled[id]+w.l.dlq[id]+w.l.parked[id] == 0 {
			w.l.destroyed[id]++
		}
	}
	w.l.mu.Unlock()
	if err := brokertest.OnChannel(w.url, func(ch *amqp.Channel) (err error) {
		d.purged, err = ch.QueueDelete(q, false, false, false)
		return err
	}); err != nil {
		w.t.Fatalf("soak: delete %s: %v", q, err)
	}
	w.mu.Lock()
	w.deletions = append(w.deletions, d)
	w.mu.Unlock()
	deleted := time.Now()
	deadline := deleted.Add(wallWait)
	for {
		_, err := w.pubTr.Inspect(context.Background(), q)
		if err == nil {
			w.t.Logf("soak: deleted %s: it held %d ready, %d on its rungs; the server declared it again within %v",
				q, d.purged, d.rungs, time.Since(deleted).Round(time.Millisecond))
			return
		}
		if !errors.Is(err, transport.ErrNotFound) && !errors.Is(err, transport.ErrClosed) {
			w.t.Logf("soak: inspect %s after its deletion: %v", q, err)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("soak: the server did not declare %s again within %v of its deletion", q, wallWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// destroyable bounds what the deletions may have taken, as
// test/faults' work-queue-deleted does: what each queue held ready
// (queue.delete-ok's count), what waited on its rungs (expiring into a
// binding that went with it), and what the server had been sent from it
// (the prefetch).
func (w *rabbitWorld) destroyable() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, d := range w.deletions {
		n += d.purged + d.rungs + d.prefetch
	}
	return n
}
