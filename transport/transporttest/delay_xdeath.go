package transporttest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// rabbitDeathOrder is the order RabbitMQ 3.10 leaves x-death entries in,
// one per queue, given the deaths oldest first: each new entry goes to
// the front, and the entries behind it come out reversed whenever there
// are two or more (rabbit_dead_letter:group_by_queue_and_reason folds
// them into a list by prepending). Newest first holds for two entries
// only: four deaths on queues 1, 2, 3, 4 read 4, 2, 1, 3.
func rabbitDeathOrder(oldestFirst []string) []string {
	var l []string
	for _, q := range oldestFirst {
		if len(l) > 1 {
			slices.Reverse(l)
		}
		l = append([]string{q}, l...)
	}
	return l
}

// testDelayXDeathOrder: a message that waited on three levels, and one on
// four, arrive with their x-death entries in the order RabbitMQ 3.10.8
// writes them (checked there: 15 units arrive with levels 00, 02, 03,
// 01), which is newest first for the first entry only.
func testDelayXDeathOrder(t *testing.T, e *env) {
	c := e.conn()
	l := e.layout(c)
	if got := rabbitDeathOrder([]string{"1", "2", "3", "4"}); !slices.Equal(got, []string{"4", "2", "1", "3"}) {
		t.Fatalf("rabbitDeathOrder = %q", got)
	}
	for _, n := range []uint64{7, 15} {
		q := e.name(fmt.Sprint(n))
		e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}, Bindings: []transport.Binding{e.bindTo(l, q)}})
		p := transport.Publishing{Exchange: l.level(topLevel(n)), RoutingKey: spell(n, q), Mandatory: true, Body: []byte(q)}
		p.DeliveryMode = 2
		if !e.publish(c, p).Routed {
			t.Fatalf("%d units: not routed", n)
		}
	}
	e.advance(15 * delay.Unit)
	for _, n := range []uint64{7, 15} {
		var walk []string // the levels it waited on, the first first
		for k := delay.Levels - 1; k >= 0; k-- {
			if n>>k&1 == 1 {
				walk = append(walk, l.level(k))
			}
		}
		d := e.recvBody(e.consume(c, e.name(fmt.Sprint(n)), 1), e.name(fmt.Sprint(n)))
		var got []string
		deaths, _ := d.Headers["x-death"].([]any)
		for _, x := range deaths {
			m, _ := x.(map[string]any)
			got = append(got, fmt.Sprint(m["queue"]))
		}
		if want := rabbitDeathOrder(walk); !slices.Equal(got, want) {
			t.Errorf("%d units: x-death queues %q, want %q (RabbitMQ's order)", n, got, want)
		}
		e.ack(d)
	}
}
