package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestPublishFaults: what Publish returns for each fault, and what the
// queue then holds.
func TestPublishFaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fault memory.Fault
		err   error // nil: none
		depth int
	}{
		{memory.Deliver, nil, 1},
		{memory.Nack, transport.ErrNacked, 0},
		{memory.Block, transport.ErrBlocked, 0},
		{memory.LoseConfirm, transport.ErrUnconfirmed, 1},
		{memory.Drop, transport.ErrUnconfirmed, 0},
	} {
		t.Run(tt.fault.String(), func(t *testing.T) {
			f := setup(t)
			f.queue("q", nil)
			f.b.SetPublishFault(memory.FaultEvery("q", tt.fault))
			_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q", Mandatory: true, Body: []byte("m")})
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("Publish: %v", err)
			case tt.err != nil:
				wantErr(t, "Publish", err, tt.err)
				if !strings.Contains(err.Error(), `"q"`) || !strings.Contains(err.Error(), tt.fault.String()) {
					t.Errorf("error %q names neither the queue nor the fault", err)
				}
			}
			info, err := f.c.Inspect(f.ctx, "q")
			if err != nil || info.Messages != tt.depth || f.b.Depth("q") != tt.depth {
				t.Errorf("Inspect = %+v, %v, Depth %d; want %d messages", info, err, f.b.Depth("q"), tt.depth)
			}
			if tt.depth == 1 {
				f.ack(f.recv(f.consume("q", 1), "m"))
			}
		})
	}
}

// TestFaultNext: the listed faults go, in order, to the next publishes to
// the queue, and to nothing else; then everything is taken.
func TestFaultNext(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.queue("other", nil)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "x", Kind: "direct", Durable: true}},
		Bindings:  []transport.Binding{{Queue: "q", Exchange: "x", Key: "q"}},
	})
	f.b.SetPublishFault(memory.FaultNext("q", memory.Nack, memory.LoseConfirm, memory.Nack))

	f.send("other", "not aimed at")
	f.publish(transport.Publishing{Exchange: "x", RoutingKey: "q", Body: []byte("through an exchange")})
	var got []string
	for i := range 5 {
		_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q", Body: []byte(fmt.Sprint(i))})
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.Is(err, transport.ErrNacked):
			got = append(got, "nacked")
		case errors.Is(err, transport.ErrUnconfirmed):
			got = append(got, "unconfirmed")
		default:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if s := strings.Join(got, " "); s != "nacked unconfirmed nacked ok ok" {
		t.Errorf("publishes: %s", s)
	}
	if s := strings.Join(f.bodies("q"), " "); s != "through an exchange 1 3 4" {
		t.Errorf("q holds %q", s)
	}
	if f.b.Depth("other") != 1 {
		t.Error("a publish to another queue was faulted")
	}
}

// TestPublishFaultCleared: a block until the alarm clears.
func TestPublishFaultCleared(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.b.SetPublishFault(memory.FaultEvery("q", memory.Block))
	for range 3 {
		_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q"})
		wantErr(t, "publish while blocked", err, transport.ErrBlocked)
	}
	f.b.SetPublishFault(nil)
	f.send("q", "after")
	if got := f.bodies("q"); len(got) != 1 || got[0] != "after" {
		t.Errorf("q holds %q", got)
	}
}

// TestPublishFaultMayUseTheBroker: the function runs with no lock held,
// so it may look at the broker, and even publish.
func TestPublishFaultMayUseTheBroker(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.queue("audit", nil)
	other := f.b.Connect()
	defer other.Close()
	f.b.SetPublishFault(func(p transport.Publishing) memory.Fault {
		if p.RoutingKey != "q" {
			return memory.Deliver
		}
		if _, err := other.Publish(context.Background(), transport.Publishing{RoutingKey: "audit", Body: p.Body}); err != nil {
			t.Errorf("publish from the fault function: %v", err)
		}
		if f.b.Depth("q") >= 2 {
			return memory.Nack
		}
		return memory.Deliver
	})
	for i := range 4 {
		_, _ = f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q", Body: []byte(fmt.Sprint(i))})
	}
	if q, audit := strings.Join(f.bodies("q"), " "), strings.Join(f.bodies("audit"), " "); q != "0 1" || audit != "0 1 2 3" {
		t.Errorf("q holds %q and audit %q; want 0 1 and 0 1 2 3", q, audit)
	}
}

// TestPublishFaultEdges: a closed connection is not asked about; a
// missing exchange stays ErrNotFound under LoseConfirm; a fault that is
// none is an error, and nothing is enqueued.
func TestPublishFaultEdges(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	asked := 0
	f.b.SetPublishFault(func(transport.Publishing) memory.Fault { asked++; return memory.LoseConfirm })
	_, err := f.c.Publish(f.ctx, transport.Publishing{Exchange: "missing", RoutingKey: "q"})
	wantErr(t, "lost confirm of a publish to a missing exchange", err, transport.ErrNotFound)

	closed := f.b.Connect()
	closed.Close()
	_, err = closed.Publish(f.ctx, transport.Publishing{RoutingKey: "q"})
	wantErr(t, "publish on a closed connection", err, transport.ErrClosed)
	if asked != 1 {
		t.Errorf("asked %d times, want once: not for the closed connection", asked)
	}

	f.b.SetPublishFault(func(transport.Publishing) memory.Fault { return memory.Fault(42) })
	_, err = f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q"})
	if err == nil || !strings.Contains(err.Error(), "fault(42)") {
		t.Errorf("publish with fault 42: %v", err)
	}
	if f.b.Depth("q") != 0 {
		t.Error("enqueued under a fault that is none")
	}
}

func TestFaultString(t *testing.T) {
	t.Parallel()
	want := map[memory.Fault]string{
		memory.Deliver: "deliver", memory.Nack: "nack", memory.Block: "block",
		memory.LoseConfirm: "lose-confirm", memory.Drop: "drop", 9: "fault(9)",
	}
	for f, s := range want {
		if f.String() != s {
			t.Errorf("Fault(%d).String() = %q, want %q", uint8(f), f.String(), s)
		}
	}
}

// TestPublishFaultsConcurrent: publishers on several connections share
// FaultNext's faults; each goes to exactly one publish. Run with -race.
func TestPublishFaultsConcurrent(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	faults := []memory.Fault{}
	for range 25 {
		faults = append(faults, memory.Nack, memory.Block, memory.LoseConfirm, memory.Drop)
	}
	f.b.SetPublishFault(memory.FaultNext("q", faults...))

	const publishers, each = 4, 100
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			conn := f.b.Connect()
			defer conn.Close()
			for range each {
				_, err := conn.Publish(f.ctx, transport.Publishing{RoutingKey: "q"})
				kind := "ok"
				for _, e := range []error{transport.ErrNacked, transport.ErrBlocked, transport.ErrUnconfirmed} {
					if errors.Is(err, e) {
						kind = e.Error()
					}
				}
				if err != nil && kind == "ok" {
					t.Errorf("Publish: %v", err)
				}
				mu.Lock()
				count[kind]++
				mu.Unlock()
				_ = f.b.Depth("q") // a reader under the publishers
			}
		})
	}
	wg.Wait()
	want := map[string]int{
		"ok":                         publishers*each - 100,
		transport.ErrNacked.Error():  25,
		transport.ErrBlocked.Error(): 25,
		// lost confirms and drops
		transport.ErrUnconfirmed.Error(): 50,
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s: %d publishes, want %d", k, count[k], n)
		}
	}
	if got, want := f.b.Depth("q"), publishers*each-75; got != want {
		t.Errorf("depth %d, want %d (taken and lost confirms)", got, want)
	}
}
