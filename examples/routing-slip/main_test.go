package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/slip"
)

// TestMain checks that no goroutine the example started (its server, the
// transport's) outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRoutingSlip runs the example on the memory transport and, when a
// broker is given, on RabbitMQ (in a vhost of its own, deleted after),
// and checks what happened: order-1 and order-2 completed, every stop
// visited once, order-2's charge on its second attempt; order-3 faulted
// at shipping.ship, refunded then released, its dead letter compensating;
// the repeated hop order-1.0 run once; and the output is the README's.
func TestRoutingSlip(t *testing.T) {
	brokertest.OnEachBroker(t, func(t *testing.T, url string) {
		if url != "" {
			url, _ = brokertest.FreshVhost(t, "", url)
		}
		var out bytes.Buffer
		res, err := run(&out, url)
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		checkOutcome(t, res)
		if want := readmeOutput(t); out.String() != want {
			t.Errorf("the output is not the README's.\ngot:\n%s\nREADME:\n%s", out.String(), want)
		}
	})
}

func checkOutcome(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Events) != 3 {
		t.Fatalf("%d events in %s, want 3 (one per slip; the repeated start none): %+v", len(res.Events), Events, res.Events)
	}
	for i, want := range []struct {
		id, kind    string
		visited     []string
		compensated []string
	}{
		{"order-1", slip.StateCompleted, Stops, nil},
		{"order-2", slip.StateCompleted, Stops, nil},
		{"order-3", slip.StateFaulted, []string{Reserve, Charge}, []string{Refund, Release}},
	} {
		e := res.Events[i]
		if e.Slip.ID != want.id || e.Kind != want.kind || e.Slip.State != want.kind || e.HopID != want.id+"."+want.kind {
			t.Errorf("event %d: slip %s, %s (state %s, id %s); want %s %s", i, e.Slip.ID, e.Kind, e.Slip.State, e.HopID, want.id, want.kind)
		}
		var visited, comp []string
		for _, v := range e.Slip.Visited {
			visited = append(visited, v.Stop)
		}
		for _, c := range e.Slip.Compensated {
			comp = append(comp, c.Queue)
		}
		if !slices.Equal(visited, want.visited) || !slices.Equal(comp, want.compensated) {
			t.Errorf("%s: visited %v, compensated %v; want %v and %v", want.id, visited, comp, want.visited, want.compensated)
		}
		if len(e.Slip.Compensations) != 0 && want.kind == slip.StateFaulted {
			t.Errorf("%s: compensations left %+v", want.id, e.Slip.Compensations)
		}
		if p := string(e.Slip.Variables["payment"]); p != `"pay-`+want.id+`"` {
			t.Errorf("%s: payment variable %s", want.id, p)
		}
	}
	if f := res.Events[2].Slip.Fault; f == nil || f.Stop != Ship || !strings.Contains(f.Reason, "no courier serves the address: Longyearbyen") {
		t.Errorf("order-3's fault %+v", f)
	}

	// What the stops did, in order, per slip: the retry, the reverse
	// compensation, the duplicate accepted without running.
	for id, want := range map[string][]string{
		"order-1": {"stock.reserve  attempt 1", "card.charge    attempt 1", "shipping.ship  attempt 1", "stock.reserve  hop order-1.0 delivered again"},
		"order-2": {"stock.reserve  attempt 1", "card.charge    attempt 1: the payment provider timed out", "card.charge    attempt 2: charged", "shipping.ship  attempt 1"},
		"order-3": {"stock.reserve  attempt 1", "card.charge    attempt 1", "shipping.ship  attempt 1: no courier", "card.refund    attempt 1: refunded pay-order-3", "stock.release  attempt 1: released rsv-order-3"},
	} {
		got := res.Journal[id]
		ok := len(got) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = strings.HasPrefix(got[i], want[i])
		}
		if !ok {
			t.Errorf("%s ran %q, want lines starting %q", id, got, want)
		}
	}
	if !slices.Equal(res.Duplicates, []string{"order-1.0"}) {
		t.Errorf("duplicates %v, want the repeated first hop order-1.0 once", res.Duplicates)
	}
	if !slices.Equal(res.Held, []string{"rsv-order-1", "rsv-order-2"}) || !slices.Equal(res.Kept, []string{"pay-order-1", "pay-order-2"}) {
		t.Errorf("reservations held %v, payments kept %v: order-3's should be undone, the others' not", res.Held, res.Kept)
	}
	if len(res.DeadLetters) != 1 || res.DeadLetters[0].Queue != "shipping.ship.dlq" || res.DeadLetters[0].Slip.ID != "order-3" ||
		res.DeadLetters[0].Slip.State != slip.StateCompensating {
		t.Errorf("dead letters %+v, want order-3's in shipping.ship.dlq, compensating", res.DeadLetters)
	}
}

// readmeOutput is the output README.md shows: its ```text block.
func readmeOutput(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```text\n")
	if !ok {
		t.Fatal("README.md has no ```text block")
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md's ```text block does not end")
	}
	return block
}
