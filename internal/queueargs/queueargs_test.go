package queueargs

import (
	"fmt"
	"strings"
	"testing"
)

// TestOrdered: single active consumer added to a copy, the caller's args
// left as they were; nothing added when not ordered.
func TestOrdered(t *testing.T) {
	args := map[string]any{"x-queue-type": "quorum"}
	got := Ordered(args, true)
	if got[SingleActiveConsumer] != true || len(args) != 1 {
		t.Errorf("Ordered: %v, the args now %v", got, args)
	}
	if got := Ordered(nil, true); fmt.Sprint(got) != "map[x-single-active-consumer:true]" {
		t.Errorf("Ordered(nil): %v", got)
	}
	if got := Ordered(args, false); fmt.Sprint(got) != fmt.Sprint(args) {
		t.Errorf("not ordered: %v", got)
	}
}

// TestCheckOrdered: a quorum queue only, and single active consumer not
// turned off by the args.
func TestCheckOrdered(t *testing.T) {
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"x-queue-type": "quorum"}, ""},
		{map[string]any{"x-queue-type": "quorum", SingleActiveConsumer: true}, ""},
		{nil, "this one is classic"},
		{map[string]any{"x-queue-type": "stream"}, "this one is stream"},
		{map[string]any{"x-queue-type": "quorum", SingleActiveConsumer: false}, "Args sets x-single-active-consumer to false"},
	} {
		err := CheckOrdered(c.args)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestDeliveryLimit: the limit with its route into the queue's own .dlq,
// at least once; refused where the broker would drop past it, on a queue
// that cannot hold it, or where the args set part of the route.
func TestDeliveryLimit(t *testing.T) {
	args := map[string]any{"x-queue-type": "quorum"}
	got, err := DeliveryLimit("orders.p1", args, 5)
	if err != nil || fmt.Sprint(got) != "map[x-dead-letter-exchange:acemq.dlx x-dead-letter-routing-key:orders.p1 x-dead-letter-strategy:at-least-once x-delivery-limit:5 x-overflow:reject-publish x-queue-type:quorum]" || len(args) != 1 {
		t.Errorf("%v %v, the args now %v", got, err, args)
	}
	if got, err := DeliveryLimit("orders", args, 0); err != nil || fmt.Sprint(got) != fmt.Sprint(args) {
		t.Errorf("no limit: %v %v", got, err)
	}
	for _, c := range []struct {
		args  map[string]any
		limit int
		want  string
	}{
		{map[string]any{"x-delivery-limit": 3}, 0, "no x-dead-letter-exchange: the broker would drop a message past the limit; set DeliveryLimit instead, which declares the route into orders.dlq"},
		{map[string]any{"x-delivery-limit": 3, "x-dead-letter-exchange": "x"}, 5, "a DeliveryLimit and an x-delivery-limit in Args; set one"},
		{args, -1, "DeliveryLimit -1; it must be zero"},
		{nil, 5, "DeliveryLimit needs a quorum queue (Args x-queue-type quorum); this one is classic"},
		{map[string]any{"x-queue-type": "quorum", "x-dead-letter-routing-key": "elsewhere"}, 5, "DeliveryLimit declares x-dead-letter-routing-key itself"},
	} {
		if _, err := DeliveryLimit("orders", c.args, c.limit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %d: %v, want %q", c.args, c.limit, err, c.want)
		}
	}
}
