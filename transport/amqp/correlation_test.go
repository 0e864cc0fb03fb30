package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

func TestIDHeaderIsTheContractsID(t *testing.T) {
	if idHeader != wire.ID {
		t.Fatalf("idHeader %q, the wire contract's id is %q", idHeader, wire.ID)
	}
}

// newTestConfirmCh is a confirmCh with no channel behind it: returns are
// put in its buffer by hand, as amqp091-go's reader would.
func newTestConfirmCh() *confirmCh {
	return &confirmCh{returns: make(chan amqp.Return, 16), pending: map[uint64]bool{}, byID: map[string]idState{}}
}

// TestRegisterByIDThenSeq: a mandatory publish is known by its id while
// no other publish on the channel holds it; a second one with the same id,
// or one with no id, is known by a seq; a publish that is not mandatory is
// not registered at all.
func TestRegisterByIDThenSeq(t *testing.T) {
	c := newTestConfirmCh()
	var seqs atomic.Uint64
	if tk := c.register(false, "a", &seqs); tk != (ticket{}) {
		t.Fatalf("not mandatory: ticket %+v, want none", tk)
	}
	first := c.register(true, "a", &seqs)
	if first != (ticket{id: "a"}) {
		t.Fatalf("first publish of a: %+v, want by id", first)
	}
	second := c.register(true, "a", &seqs)
	if second.seq == 0 || second.id != "" {
		t.Fatalf("second publish of a in flight: %+v, want by seq", second)
	}
	noID := c.register(true, "", &seqs)
	if noID.seq == 0 || noID.seq == second.seq {
		t.Fatalf("publish without an id: %+v, want a seq of its own", noID)
	}
	// a returned, by id; the seq publish of the same id not.
	c.returns <- amqp.Return{Headers: amqp.Table{idHeader: "a"}}
	if !c.settle(first) {
		t.Error("the return by id did not reach the publish that holds the id")
	}
	if c.settle(second) {
		t.Error("the publish by seq was taken as returned by a return without its seq")
	}
	c.returns <- amqp.Return{Headers: amqp.Table{idHeader: "x", seqHeader: int64(noID.seq)}}
	if !c.settle(noID) {
		t.Error("the return by seq did not reach its publish")
	}
	if again := c.register(true, "a", &seqs); again != (ticket{id: "a"}) {
		t.Errorf("a after both settled: %+v, want by id again", again)
	}
}

// TestForgottenIDStaysTaken: a publish known by its id and forgotten
// before its confirm (ctx ended, no confirm in time) leaves its id taken:
// its return may still come, and must not be read as the return of a
// later publish of the same id, which goes by seq.
func TestForgottenIDStaysTaken(t *testing.T) {
	c := newTestConfirmCh()
	var seqs atomic.Uint64
	old := c.register(true, "a", &seqs)
	if c.forget(old, false) {
		t.Fatal("one forgotten id: crowded")
	}
	next := c.register(true, "a", &seqs)
	if next.seq == 0 {
		t.Fatalf("a publish of a forgotten id: %+v, want by seq", next)
	}
	c.returns <- amqp.Return{Headers: amqp.Table{idHeader: "a"}} // the old one's, late
	if c.settle(next) {
		t.Error("the forgotten publish's return was taken for the next one's")
	}
}

// TestForgetResolvedDrains: a publish whose confirmation is done (a nack,
// a close) is forgotten with its return, so its id is free again and a
// later publish of it is not taken as returned.
func TestForgetResolvedDrains(t *testing.T) {
	c := newTestConfirmCh()
	var seqs atomic.Uint64
	nacked := c.register(true, "a", &seqs)
	c.returns <- amqp.Return{Headers: amqp.Table{idHeader: "a"}}
	c.forget(nacked, true)
	next := c.register(true, "a", &seqs)
	if next != (ticket{id: "a"}) {
		t.Fatalf("a after a resolved forget: %+v, want by id", next)
	}
	if c.settle(next) {
		t.Error("the forgotten publish's return was left for the next one")
	}
}

// TestTooManyForgottenIDsRetire: past maxGhosts ids forgotten before
// their confirm, forget says the channel should be retired.
func TestTooManyForgottenIDsRetire(t *testing.T) {
	c := newTestConfirmCh()
	var seqs atomic.Uint64
	for i := range maxGhosts + 1 {
		crowded := c.forget(c.register(true, fmt.Sprint(i), &seqs), false)
		if crowded != (i == maxGhosts) {
			t.Fatalf("forgotten id %d: crowded %v", i+1, crowded)
		}
	}
}

// TestExpiryClockNeverEarly: the ticks a publish waits for its confirm
// cover the timeout even when its wait began just before a tick, and add
// at most two ticks to it.
func TestExpiryClockNeverEarly(t *testing.T) {
	for _, timeout := range []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, 5 * time.Second, DefaultConfirmTimeout, time.Hour} {
		every, ticks := expiryClock(timeout)
		if every <= 0 || every > drainEvery {
			t.Errorf("timeout %s: tick %s", timeout, every)
		}
		// Waiting from just before a tick, the first counts almost at once.
		if least := time.Duration(ticks-1) * every; least < timeout {
			t.Errorf("timeout %s: %d ticks of %s can end after %s", timeout, ticks, every, least)
		}
		if most := time.Duration(ticks) * every; most > timeout+2*every {
			t.Errorf("timeout %s: %d ticks of %s wait up to %s", timeout, ticks, every, most)
		}
	}
}

// TestAwaitTimesOutOnTicks: a confirm that never comes is unconfirmed
// after the confirm timeout, counted in the publisher's ticks, and not
// before; its id stays taken on the channel.
func TestAwaitTimesOutOnTicks(t *testing.T) {
	p := &publisher{confirmTimeout: 40 * time.Millisecond, stop: make(chan struct{})}
	p.tickEvery, p.expiryTicks = expiryClock(p.confirmTimeout)
	expiry := make(chan struct{})
	p.expiry.Store(&expiry)
	p.wg.Add(1)
	go p.drainLoop()
	defer p.close()
	c := newTestConfirmCh()
	var seqs atomic.Uint64
	tk := c.register(true, "a", &seqs)
	start := time.Now()
	never := &amqp.DeferredConfirmation{} // its Done never closes
	_, _, err := p.await(context.Background(), c, tk, never, &transport.Publishing{RoutingKey: "q", Mandatory: true})
	if !errors.Is(err, transport.ErrUnconfirmed) {
		t.Fatalf("await = %v, want ErrUnconfirmed", err)
	}
	if waited := time.Since(start); waited < p.confirmTimeout {
		t.Errorf("gave up after %s, before the confirm timeout %s", waited, p.confirmTimeout)
	}
	if c.byID["a"] != idGhost {
		t.Errorf("the id of a publish that timed out is %v, want still taken", c.byID["a"])
	}
}

// TestPublishCorrelationByID: publishes with ids, some shared by several
// publishes in flight at once, some without, some routed and some
// returned, on two channels: every publish learns its own outcome, and a
// message whose id was free went out without the transport's seq header.
func TestPublishCorrelationByID(t *testing.T) {
	t.Parallel()
	tr := dial(t, WithPublishChannels(2), WithInFlight(64))
	q := declareQueue(t, tr, "q", nil)
	nowhere := name(t, "missing")
	ctx := testCtx(t, 60*time.Second)
	const n = 1500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			key, want := q, true
			if i%3 == 0 {
				key, want = nowhere, false
			}
			h := map[string]any{idHeader: fmt.Sprint("id-", i)}
			switch i % 5 {
			case 1, 2: // ids shared by many publishes, routed and returned
				h[idHeader] = fmt.Sprint("shared-", i%10)
			case 3:
				h = nil
			case 4: // a seq header of the caller's, replaced
				h[seqHeader] = int64(1)
			}
			conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: key, Mandatory: true, Headers: h, Body: []byte("x")})
			if err != nil {
				errs <- err
			} else if conf.Routed != want {
				errs <- fmt.Errorf("publish %d (headers %v) to %s: Routed = %v, want %v", i, h, key, conf.Routed, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, err := tr.Inspect(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - (n+2)/3; info.Messages != want {
		t.Errorf("queue holds %d, want %d", info.Messages, want)
	}

	// One publish alone, with a fresh id: read raw, it carries no seq.
	declared := declareQueue(t, tr, "alone", nil)
	if _, err := tr.Publish(ctx, transport.Publishing{RoutingKey: declared, Mandatory: true,
		Headers: map[string]any{idHeader: "only"}, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := withRaw(t, func(ch *amqp.Channel) error {
		d, ok, err := ch.Get(declared, true)
		if err != nil || !ok {
			return fmt.Errorf("get: %v, %v", ok, err)
		}
		if _, carried := d.Headers[seqHeader]; carried {
			return fmt.Errorf("a publish whose id was free carried %s: %v", seqHeader, d.Headers)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
