package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestStalledFor(t *testing.T) {
	const after = 10 * time.Second
	s := int64(time.Second)
	for _, c := range []struct {
		name                              string
		waiting                           int64
		busySince, lastAnswer, since, now int64
		want                              bool
		wantSilent                        int64
	}{
		{"nothing waiting", 0, 1 * s, 2 * s, 0, 100 * s, false, 0},
		{"waiting, under the bound", 3, 90 * s, 50 * s, 0, 99 * s, false, 90 * s},
		{"waiting since the bound, no answer since", 3, 90 * s, 50 * s, 0, 100 * s, true, 90 * s},
		{"waiting long, but answered lately", 3, 10 * s, 95 * s, 0, 100 * s, false, 95 * s},
		{"stalled, no answer since", 0, 10 * s, 50 * s, 60 * s, 200 * s, true, 60 * s},
		{"stalled, nothing waiting any more (timed out): still stalled", 0, 10 * s, 50 * s, 60 * s, 500 * s, true, 60 * s},
		{"stalled, then an answer", 1, 10 * s, 61 * s, 60 * s, 62 * s, false, 60 * s},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, silent := stalledFor(c.waiting, c.busySince, c.lastAnswer, c.since, c.now, after)
			if got != c.want || (got && silent != c.wantSilent) {
				t.Errorf("stalledFor = %v, silent since %v; want %v, %v", got, silent, c.want, c.wantSilent)
			}
		})
	}
	if got, _ := stalledFor(5, 1, 0, 0, 1000*s, 0); got {
		t.Error("stalled with the watch off")
	}
}

// Publishes that give up before the bound and are tried again, none
// answered, are one silence: the broker is stalled once the first of
// them began the bound ago, though none waited that long.
func TestStallAcrossShortPublishes(t *testing.T) {
	log := zap.NewNop()
	w := &stallWatch{after: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	w.begin(t0)
	w.answer(t0.Add(time.Millisecond))
	w.end()
	for i := range 4 { // 3 s each, no answer
		at := t0.Add(time.Second + time.Duration(i)*3*time.Second)
		w.begin(at)
		w.tick(at.Add(2*time.Second), 1, log)
		if i < 3 && w.err(at) != nil {
			t.Fatalf("stalled %s after the last answer", at.Sub(t0))
		}
		if i < 3 {
			w.end()
		}
	}
	if err := w.err(t0.Add(12 * time.Second)); !errors.Is(err, transport.ErrStalled) {
		t.Fatalf("not stalled 12 s into four 3 s publishes with no answer: %v", err)
	}
	w.answer(t0.Add(13 * time.Second))
	w.tick(t0.Add(13*time.Second), 1, log)
	if err := w.err(t0.Add(13 * time.Second)); err != nil {
		t.Fatalf("still stalled after an answer: %v", err)
	}
}

// TestStallAdmitsOneProbe: a stalled watch lets one publish through at a
// time, only while no other waits and once per stall bound, and refuses
// the others, wrapping ErrStalled; not stalled, it lets every publish
// through.
func TestStallAdmitsOneProbe(t *testing.T) {
	t.Parallel()
	w := stallWatch{after: 10 * time.Second}
	now := time.Now()
	for range 3 {
		if probe, err := w.admit(now); probe || err != nil {
			t.Fatalf("not stalled: admit = %v, %v, want every publish let through", probe, err)
		}
	}
	w.since.Store(now.Add(-time.Minute).UnixNano())
	probe, err := w.admit(now)
	if !probe || err != nil {
		t.Fatalf("stalled, the first: admit = %v, %v, want the probe", probe, err)
	}
	if probe, err := w.admit(now); probe || !errors.Is(err, transport.ErrStalled) {
		t.Fatalf("stalled, a second while the probe waits: admit = %v, %v, want ErrStalled", probe, err)
	}
	w.probed()
	if probe, err := w.admit(now.Add(9 * time.Second)); probe || !errors.Is(err, transport.ErrStalled) {
		t.Fatalf("stalled, 9 s after the probe: admit = %v, %v, want ErrStalled (one probe per stall bound)", probe, err)
	}
	later := now.Add(10 * time.Second)
	w.begin(later) // a publish sent before the stall, still waiting
	if probe, err := w.admit(later); probe || !errors.Is(err, transport.ErrStalled) {
		t.Fatalf("stalled, a publish waiting: admit = %v, %v, want ErrStalled (its answer ends the stall)", probe, err)
	}
	w.end()
	if probe, err := w.admit(later); !probe || err != nil {
		t.Fatalf("stalled, nothing waiting, the bound passed: admit = %v, %v, want the next probe", probe, err)
	}
}

// TestStallSeen: a broker that takes publishes and answers none (its VM stopped: its
// sockets open, nothing read or sent back, as a node cut off from its
// cluster's majority confirms nothing) is called stalled once a publish
// has waited WithStallAfter: Check fails with transport.ErrStalled and a
// warning says so. When the broker goes on, the waiting publish is
// confirmed, Check passes again, and an info line says the stall ended.
// Meanwhile a second publish is refused unsent.
func TestStallSeen(t *testing.T) {
	node := privateNode(t)
	node.Acquire(t)
	url, _ := node.FreshVhost(t)
	core, logs := observer.New(zap.InfoLevel)
	tr := dialURL(t, url, WithLogger(zap.New(core)), WithStallAfter(time.Second), WithHeartbeat(time.Minute))
	q := fmt.Sprintf("acemq-test-stall-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		t.Fatalf("Declare: %v", err)
	}
	publish := func() error {
		_, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("m")})
		return err
	}
	if err := publish(); err != nil {
		t.Fatalf("publish before the freeze: %v", err)
	}
	if err := tr.Check(); err != nil {
		t.Fatalf("Check before the freeze: %v", err)
	}

	node.Freeze(t)
	done := make(chan error, 1)
	go func() { done <- publish() }()
	polltest.Within(t, time.Minute, "Check fails with ErrStalled", func() bool {
		err := tr.Check()
		return errors.Is(err, transport.ErrStalled)
	})
	if n := logs.FilterMessageSnippet("the broker stalled").Len(); n != 1 {
		t.Errorf("%d warnings that the broker stalled, want 1", n)
	}
	msg := tr.Check().Error()
	if !strings.Contains(msg, "waiting for the broker: 1") || !strings.Contains(msg, "publish connection") {
		t.Errorf("Check: %q does not say what waits, and on which connection", msg)
	}

	// While stalled, another publish is refused before it is sent: it
	// would only add an unknown outcome (and a duplicate, if the node
	// takes it after all). The one in flight is the probe.
	err := publish()
	if !errors.Is(err, transport.ErrStalled) || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("a publish while stalled: %v, want a refusal, not sent, wrapping ErrStalled", err)
	}

	node.Thaw(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the publish made during the freeze: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the publish made during the freeze never returned")
	}
	polltest.Within(t, time.Minute, "Check passes after the thaw", func() bool { return tr.Check() == nil })
	if n := logs.FilterMessageSnippet("answers publishes again").Len(); n != 1 {
		t.Errorf("%d info lines that the stall ended, want 1", n)
	}
}
