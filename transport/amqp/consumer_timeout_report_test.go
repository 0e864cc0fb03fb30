package rabbitmq

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestStatedTimeout: the timeout RabbitMQ says it used when it closes a
// channel for its consumer_timeout, read from its reason (3.10.8's words),
// and 0 where the reason does not say it readably.
func TestStatedTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reason string
		want   time.Duration
	}{
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 2 timed out. Timeout value used: 1800000 ms. This timeout value can be configured, see consumers doc guide to learn more", 30 * time.Minute},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1000 ms.", time.Second},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out", 0},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: ms.", 0},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: -5 ms.", 0},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 99999999999999999999 ms.", 0},
		{"PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1000", 0},
		{"", 0},
	} {
		if got := statedTimeout(tt.reason); got != tt.want {
			t.Errorf("statedTimeout(%q) = %v, want %v", tt.reason, got, tt.want)
		}
	}
}

// TestConsumerTimeoutReported runs the suite's case on the private node
// with consumer_timeout at 1s, checked every 100ms: the subscription tells
// its user the 1000 ms RabbitMQ 3.10.8 states, before the delivery comes
// back. As TestConsumerTimeout, it sets both before dialling and puts the
// node's own back.
func TestConsumerTimeoutReported(t *testing.T) {
	node := privateNode(t)
	node.Acquire(t)
	url, _ := node.FreshVhost(t)
	const timeout = time.Second
	for key, value := range map[string]string{"consumer_timeout": fmt.Sprint(timeout.Milliseconds()), "channel_tick_interval": "100"} {
		was := strings.TrimSpace(node.Ctl(t, "eval", fmt.Sprintf("application:get_env(rabbit, %s).", key)))
		old, ok := strings.CutPrefix(strings.TrimSuffix(was, "}"), "{ok,")
		if !ok {
			t.Fatalf("%s on the private node: %q", key, was)
		}
		t.Cleanup(func() { node.Ctl(t, "eval", fmt.Sprintf("application:set_env(rabbit, %s, %s).", key, old)) })
		node.Ctl(t, "eval", fmt.Sprintf("application:set_env(rabbit, %s, %s).", key, value))
	}
	transporttest.ConsumerTimeoutReported(t, transporttest.Harness{
		New:     func(tb testing.TB) transport.Transport { return dialURL(tb, url) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
	}, timeout)
}
