package retry_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/acemq/acemq/retry"
)

// TestRungArgsArePinned pins the rung declaration shared by every AceMQ
// library: a rung declared with any other arguments is refused to the next
// service that declares it.
func TestRungArgsArePinned(t *testing.T) {
	t.Parallel()
	got := retry.RungArgs("shipping.orders", 40*time.Second)
	want := map[string]any{
		"x-message-ttl":             int64(40000),
		"x-dead-letter-exchange":    "acemq.retry",
		"x-dead-letter-routing-key": "shipping.orders",
	}
	if !maps.Equal(got, want) {
		t.Errorf("RungArgs = %#v, want exactly %#v", got, want)
	}
}

func TestRungName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{40 * time.Second, "shipping.orders.retry.40s"},
		{5 * time.Minute, "shipping.orders.retry.5m"},
		{90 * time.Minute, "shipping.orders.retry.1h30m"},
		{90 * time.Second, "shipping.orders.retry.1m30s"},
		{250 * time.Millisecond, "shipping.orders.retry.250ms"},
		{1500 * time.Millisecond, "shipping.orders.retry.1s500ms"},
		{2 * time.Hour, "shipping.orders.retry.2h"},
		{0, "shipping.orders.retry.0s"},
	}
	for _, tt := range tests {
		if got := retry.RungName("shipping.orders", tt.d); got != tt.want {
			t.Errorf("RungName(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func ExamplePolicy_Schedule() {
	p := retry.Exponential(6, 10*time.Second, 0)
	for _, step := range p.Schedule() {
		fmt.Println(step)
	}
	fmt.Println(p.BrokerRungs())
	for _, d := range p.BrokerRungs() {
		fmt.Println(retry.RungName("shipping.orders", d))
	}
	// Output:
	// 10s in the process
	// 20s in the process
	// 40s on a rung
	// 1m20s on a rung
	// 2m40s on a rung
	// [40s 1m20s 2m40s]
	// shipping.orders.retry.40s
	// shipping.orders.retry.1m20s
	// shipping.orders.retry.2m40s
}

func ExamplePolicy_NextWait() {
	p := retry.Fixed(3, time.Minute)
	for attempt := 1; attempt <= 3; attempt++ {
		w, ok := p.NextWait(attempt, 0)
		fmt.Println(attempt, w.Delay, w.Where, ok)
	}
	// Output:
	// 1 1m0s rung true
	// 2 1m0s rung true
	// 3 0s process false
}
