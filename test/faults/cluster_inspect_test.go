package faults_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/brokertest"
)

// delayQueues are the level queues of the delay infrastructure.
func delayQueues() []string {
	out := make([]string, delay.Levels)
	for k := range out {
		out[k] = delay.Level(k)
	}
	return out
}

// leaders maps each quorum queue to its leader, as node n sees it.
func leaders(tb testing.TB, n *brokertest.Node) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(n.Ctl(tb, "list_queues", "name", "leader", "--no-table-headers"), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}

// holding reads the queues that hold messages, as node n sees them, and
// returns how many messages of the quorum queues qs are neither ready nor
// unacknowledged (dead-lettered and waiting for their next queue to
// confirm them), and each queue's messages, ready and unacknowledged.
// rabbitmqctl leaves out a quorum queue that does not answer within a
// second, as some may not just after a node loss: the description says
// how many of qs were left out. A new leader's counts are zero until its
// first tick.
func holding(tb testing.TB, n *brokertest.Node, qs []string) (int, string) {
	tb.Helper()
	var held, listed int
	var out []string
	for _, line := range strings.Split(n.Ctl(tb, "list_queues", "name", "messages", "messages_ready", "messages_unacknowledged", "--no-table-headers"), "\n") {
		f := strings.Fields(line)
		var all, ready, unacked int
		if len(f) != 4 {
			continue
		}
		if _, err := fmt.Sscan(f[1]+" "+f[2]+" "+f[3], &all, &ready, &unacked); err != nil {
			continue
		}
		if slices.Contains(qs, f[0]) {
			listed++
			held += all - ready - unacked
		}
		if all != 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	desc := strings.Join(out, "; ")
	if listed < len(qs) {
		desc += fmt.Sprintf(" (%d of the %d levels not listed)", len(qs)-listed, len(qs))
	}
	return held, desc
}

// countLeaders counts queues by leader.
func countLeaders(leaders map[string]string, queues []string) map[string]int {
	out := map[string]int{}
	for _, q := range queues {
		out[leaders[q]]++
	}
	return out
}

// waiting is how many messages queues hold now, read through url; a
// queue that cannot be read counts none.
func waiting(url string, queues []string) int {
	n := 0
	_ = raw(url, func(ch *amqp.Channel) error {
		for _, name := range queues {
			q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			if err != nil {
				return err
			}
			n += q.Messages
		}
		return nil
	})
	return n
}

// plainTable is an amqp091-go table as the transport hands headers to the
// library: nested tables as map[string]any.
func plainTable(t amqp.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = plainField(v)
	}
	return out
}

func plainField(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return plainTable(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainField(e)
		}
		return out
	}
	return v
}

// queueArguments is queue's declaration arguments, as node n lists them.
func queueArguments(tb testing.TB, n *brokertest.Node, queue string) string {
	tb.Helper()
	for _, line := range strings.Split(n.Ctl(tb, "list_queues", "name", "arguments", "--no-table-headers"), "\n") {
		if name, args, ok := strings.Cut(line, "\t"); ok && name == queue {
			return args
		}
	}
	return ""
}

// holdingAll is every queue that holds messages, with its counts (all,
// ready, unacknowledged), as node n lists them.
func holdingAll(tb testing.TB, n *brokertest.Node) string {
	tb.Helper()
	_, desc := holding(tb, n, nil)
	return desc
}
