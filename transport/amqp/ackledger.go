package rabbitmq

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ackLinger bounds how long an ack waits for others to share its frame.
const ackLinger = time.Millisecond

// ackLedger coalesces the acks of one consume channel into multiple-acks.
//
// The broker spends most of a consumed message's cost in the queue's
// process, and an ack frame per message is a good part of it: one
// basic.ack with multiple set settles every delivery up to its tag in one
// step. Measured on RabbitMQ 3.10 with a local classic queue, acking in
// batches drains a queue up to twice as fast as acking one by one.
//
// So acks wait to be sent together: until a quarter of the prefetch is
// waiting, or the oldest has waited ackLinger, then the settled run at the
// head of the channel goes in one multiple-ack. Coalescing must never
// settle a delivery the caller has not: a multiple-ack with tag T acks
// every unsettled delivery up to T. So an ack behind an older delivery that
// is still unsettled (a handler still running, a message waiting in the
// process) cannot join it; it waits for that delivery, and is sent alone
// if the delivery stays unsettled for a whole linger or three quarters of
// the prefetch waits behind it. Rejects are always sent alone and first.
// Delivery tags on a consume channel are dense (1, 2, 3, ... in delivery
// order), so the ledger needs no record of deliveries, only of
// settlements. Closing the subscription sends whatever waits.
//
// One caller at a time sends, in the order the ledger decided: a frame
// that names a tag must reach the broker before a multiple-ack that covers
// it (a multiple-ack whose own tag is already settled closes the channel
// with "unknown delivery tag"). Callers who settle while another sends
// leave their frame to that sender and return at once: an Ack that returns
// nil has been recorded, and if the channel dies before its frame is sent
// the broker redelivers the message (at-least-once, as with any ack lost
// with its connection).
type ackLedger struct {
	ch     ackChannel
	hold   int           // acks that may wait: a quarter of the prefetch
	linger time.Duration // how long they may wait: ackLinger

	mu      sync.Mutex
	base    uint64      // the tag of marks[0]: every tag below it is settled
	marks   []ackMark   // from base upwards; tags beyond are unsettled
	waiting int         // ackWanted marks
	lowAck  uint64      // the lowest tag marked ackWanted since acks last went alone, 0 for none
	rejects []ackFrame  // rejects to send, in the order they were asked
	sending bool        // a caller is sending frames
	idle    sync.Cond   // signalled when sending ends
	due     bool        // the linger ran out: send the head's acks
	stuck   bool        // and the head did not move in it: send all that wait
	linged  uint64      // base at the last linger
	timer   *time.Timer // the linger, armed while acks wait
	armed   bool
	closed  bool
	fired   sync.WaitGroup // linger callbacks in flight
}

// ackChannel is what the ledger sends on: an *amqp.Channel.
type ackChannel interface {
	Ack(tag uint64, multiple bool) error
	Nack(tag uint64, multiple, requeue bool) error
	Reject(tag uint64, requeue bool) error
}

type ackMark uint8

const (
	unsettled ackMark = iota
	ackWanted         // acked by the caller, no frame sent yet
	sent              // a frame for it was sent or is queued
)

type ackFrame struct {
	tag      uint64
	multiple bool // an ack covering every unsettled tag up to tag
	reject   bool
	requeue  bool
}

func newAckLedger(ch ackChannel, prefetch int) *ackLedger {
	l := &ackLedger{ch: ch, hold: max(1, prefetch/4), linger: ackLinger, base: 1}
	l.idle.L = &l.mu
	return l
}

// setPrefetch sizes the ledger for a new prefetch: a subscription's ends
// its probation at prefetch 1 (probation.go) on the same channel.
func (l *ackLedger) setPrefetch(prefetch int) {
	l.mu.Lock()
	l.hold = max(1, prefetch/4)
	l.mu.Unlock()
}

// ack records that tag was handled and sends what that allows.
func (l *ackLedger) ack(tag uint64) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return transport.ErrStaleDelivery
	}
	l.mark(tag, ackWanted)
	return l.send()
}

// reject queues a reject of tag and sends it: with requeue a give-back,
// sent as basic.nack (giveBack).
func (l *ackLedger) reject(tag uint64, requeue bool) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return transport.ErrStaleDelivery
	}
	l.mark(tag, sent)
	l.rejects = append(l.rejects, ackFrame{tag: tag, reject: true, requeue: requeue})
	return l.send()
}

// flush sends every ack that is waiting, then stops the linger: the
// channel is about to close, and an ack recorded but not sent would be
// redelivered.
func (l *ackLedger) flush() {
	l.mu.Lock()
	for l.sending {
		l.idle.Wait() // its frames must be out before ours, and before the close
	}
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.due, l.stuck = true, true
	_ = l.send()
	l.close()
}

// close stops the ledger (its channel is gone): later settlements are
// stale. It returns once no linger callback is running.
func (l *ackLedger) close() {
	l.mu.Lock()
	l.closed = true
	if l.armed && l.timer.Stop() {
		l.armed = false
		l.fired.Done()
	}
	l.mu.Unlock()
	l.fired.Wait()
}

// mark records tag's new state. Called with mu held.
func (l *ackLedger) mark(tag uint64, m ackMark) {
	i := int(tag - l.base)
	for len(l.marks) <= i {
		l.marks = append(l.marks, unsettled)
	}
	l.marks[i] = m
	if m == ackWanted {
		l.waiting++
		if l.lowAck == 0 || tag < l.lowAck {
			l.lowAck = tag
		}
	}
}

// send sends the frames the ledger's state allows, unless another caller
// is already doing so (it will pick them up). Called with mu held; returns
// with it released.
func (l *ackLedger) send() error {
	if l.sending {
		l.mu.Unlock()
		return nil
	}
	l.sending = true
	var firstErr error
	for {
		frames := l.plan()
		if len(frames) == 0 {
			break
		}
		l.mu.Unlock()
		for _, f := range frames {
			if err := l.write(f); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				break // the channel is gone: everything after is stale too
			}
		}
		l.mu.Lock()
		if firstErr != nil {
			break
		}
	}
	l.sending = false
	l.idle.Broadcast()
	l.arm()
	l.mu.Unlock()
	return firstErr
}

// plan turns the recorded settlements into frames, in the order they must
// be sent, and forgets what they cover. Called with mu held.
func (l *ackLedger) plan() []ackFrame {
	frames := l.rejects
	l.rejects = nil
	// The settled run at the head: one ack covers every ackWanted in it,
	// once enough of them wait or they have waited long enough.
	n, acks, last := 0, 0, uint64(0)
	for n < len(l.marks) && l.marks[n] != unsettled {
		if l.marks[n] == ackWanted {
			acks, last = acks+1, l.base+uint64(n)
		}
		n++
	}
	behind, from := l.waiting-acks, n // the acks after the run, and where
	// A long run (its acks went alone while its head waited) goes at once,
	// or each settlement would walk it again.
	if n > 0 && (acks == 0 || l.due || l.waiting >= l.hold || n >= 4*l.hold) {
		l.marks = l.marks[n:]
		l.base += uint64(n)
		l.waiting -= acks
		from = 0
		if acks > 0 {
			frames = append(frames, ackFrame{tag: last, multiple: true})
		}
	}
	// Acks behind an unsettled delivery go alone when that delivery stayed
	// unsettled for a whole linger (a message waiting in the process, not
	// a handler about to finish), or when they fill three quarters of the
	// prefetch: a handler held up that long (descheduled on a busy machine)
	// would otherwise stall the channel.
	if behind > 0 && (l.stuck || behind >= 3*l.hold) {
		// Every ackWanted after the run was marked since acks last went
		// alone, all of them then: start at the lowest, not at the run,
		// which a delivery held for long keeps at the head while the
		// channel delivers on.
		if l.lowAck > l.base+uint64(from) {
			from = int(l.lowAck - l.base)
		}
		for i := from; i < len(l.marks); i++ {
			if l.marks[i] == ackWanted {
				frames = append(frames, ackFrame{tag: l.base + uint64(i)})
				l.marks[i] = sent
			}
		}
		l.waiting -= behind
		l.lowAck = 0
	}
	l.due, l.stuck = false, false
	if len(l.marks) == 0 && cap(l.marks) > 1024 {
		l.marks = nil // a burst grew it: let it go
	}
	return frames
}

// write sends one frame.
func (l *ackLedger) write(f ackFrame) error {
	var err error
	switch {
	case f.reject && f.requeue:
		err = giveBack(l.ch, f.tag)
	case f.reject:
		err = l.ch.Reject(f.tag, false)
	default:
		err = l.ch.Ack(f.tag, f.multiple)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, amqp.ErrClosed) {
		return transport.ErrStaleDelivery
	}
	return fmt.Errorf("acemq: settle delivery %d: %w", f.tag, classify(err))
}

// arm starts the linger while acks wait.
// Called with mu held.
func (l *ackLedger) arm() {
	if l.waiting == 0 || l.armed || l.closed {
		return
	}
	l.armed = true
	l.fired.Add(1)
	if l.timer == nil {
		l.timer = time.AfterFunc(l.linger, l.lingered)
		return
	}
	l.timer.Reset(l.linger)
}

// lingered runs when acks have waited l.linger: they are sent.
func (l *ackLedger) lingered() {
	defer l.fired.Done()
	l.mu.Lock()
	l.armed = false
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.due = true
	l.stuck = l.base == l.linged
	l.linged = l.base
	_ = l.send()
}
