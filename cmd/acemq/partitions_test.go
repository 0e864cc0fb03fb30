package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func TestPartitionName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		queue string
		index int
		ok    bool
	}{
		{"orders.p2", "orders", 2, true},
		{"orders.p0", "orders", 0, true},
		{"orders.p10", "orders", 10, true},
		{"a.p1.p3", "a.p1", 3, true},
		{"orders.p02", "", 0, false}, // a leading zero: PartitionName never writes one
		{"orders.p", "", 0, false},
		{"orders.p-1", "", 0, false},
		{"orders.p+1", "", 0, false},
		{"orders.p1x", "", 0, false},
		{".p1", "", 0, false},
		{"orders", "", 0, false},
		{"orders.p99999999999", "", 0, false},
		{"orders.payments", "", 0, false},
	} {
		q, i, ok := partitionName(c.name)
		if q != c.queue || i != c.index || ok != c.ok {
			t.Errorf("%s: %q %d %v, want %q %d %v", c.name, q, i, ok, c.queue, c.index, c.ok)
		}
	}
}

// listingOf is the management API's listing of names, each with one ready
// message.
func listingOf(names string) []queueStat {
	var stats []queueStat
	for _, n := range strings.Split(names, ",") {
		one, zero := 1, 0
		stats = append(stats, queueStat{Name: n, Type: "classic", State: "running", Messages: &one, Ready: &one, Unacked: &zero, Consumers: &zero})
	}
	return stats
}

// summary is the services as "a(2)" for a partitioned queue of two
// partitions, "b" for a plain one, and the other queues after "|".
func summary(services []service, other []string) string {
	var parts []string
	for _, s := range services {
		if s.Partitions != nil {
			var members []string
			for i, p := range s.Partitions {
				if p.Index != i {
					members = append(members, fmt.Sprintf("index %d at %d", p.Index, i))
				}
				members = append(members, p.Queue)
			}
			parts = append(parts, fmt.Sprintf("%s(%d:%s)", s.Queue, len(s.Partitions), strings.Join(members, " ")))
			continue
		}
		parts = append(parts, s.Queue)
	}
	return strings.Join(parts, ",") + "|" + strings.Join(other, ",")
}

// TestStatusPartitionSets: which names are a partitioned queue.
func TestStatusPartitionSets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, names string
		only        []string
		want        string
	}{
		{"two partitions", "a.p0,a.p0.dlq,a.p1,a.p1.dlq", nil, "a(2:a.p0 a.p1)|"},
		{"one partition is a set", "d.p0,d.p0.parked", nil, "d(1:d.p0)|"},
		{"a lone p1 is a queue of its own", "app.p1,app.p1.dlq", nil, "app.p1|"},
		{"a gap: no set", "c.p0,c.p0.dlq,c.p2,c.p2.dlq", nil, "c.p0,c.p2|"},
		{"p10 after p9, by index", "e.p0,e.p0.dlq,e.p1,e.p1.dlq,e.p10,e.p10.dlq,e.p2,e.p2.dlq,e.p3,e.p3.dlq,e.p4,e.p4.dlq,e.p5,e.p5.dlq,e.p6,e.p6.dlq,e.p7,e.p7.dlq,e.p8,e.p8.dlq,e.p9,e.p9.dlq", nil,
			"e(11:e.p0 e.p1 e.p2 e.p3 e.p4 e.p5 e.p6 e.p7 e.p8 e.p9 e.p10)|"},
		{"c.p1 and c.p10 without c.p0", "c.p1,c.p1.dlq,c.p10,c.p10.dlq", nil, "c.p1,c.p10|"},
		{"a leading zero is no partition", "f.p0,f.p0.dlq,f.p01,f.p01.dlq", nil, "f(1:f.p0),f.p01|"},
		{"a plain queue beside its partitions, the plain one first", "g,g.dlq,g.p0,g.p0.dlq,g.p1,g.p1.dlq", nil, "g,g(2:g.p0 g.p1)|"},
		{"a family left behind past the count", "h.p0,h.p0.dlq,h.p1,h.p1.dlq,h.p2.dlq", nil, "h(2:h.p0 h.p1),h.p2|"},
		{"a partition without family of its own joins", "i.p0,i.p0.dlq,i.p1", nil, "i(2:i.p0 i.p1)|"},
		{"no service among them: not acemq's", "shard.p0,shard.p1", nil, "|shard.p0,shard.p1"},
		{"work queues missing: no set", "j.p0.dlq,j.p1.dlq", nil, "j.p0,j.p1|"},
		{"a rung is family", "l.p0,l.p0.retry.40s,l.p1,l.p1.dlq", nil, "l(2:l.p0 l.p1)|"},
		{"a name that only looks like one", "m.px,m.px.dlq,m.p,m.p.dlq", nil, "m.p,m.px|"},
		{"mixed", "a.p0,a.p0.dlq,a.p1,a.p1.dlq,b,b.dlq,c.p1,c.p1.dlq,c.p10,c.p10.dlq,audit", nil, "a(2:a.p0 a.p1),b,c.p1,c.p10|audit"},
		{"--queue a names the set", "a.p0,a.p0.dlq,a.p1,a.p1.dlq,b,b.dlq", []string{"a"}, "a(2:a.p0 a.p1)|"},
		{"--queue a.p1.dlq names its set", "a.p0,a.p0.dlq,a.p1,a.p1.dlq,b,b.dlq", []string{"a.p1.dlq"}, "a(2:a.p0 a.p1)|"},
		{"--queue g names both", "g,g.dlq,g.p0,g.p0.dlq,b,b.dlq", []string{"g"}, "g,g(1:g.p0)|"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			services, _, other := group(listingOf(c.names), c.only)
			if got := summary(services, other); got != c.want {
				t.Errorf("%s: %s, want %s", c.names, got, c.want)
			}
		})
	}
}

// cannedPartitions is GET /api/queues/prod with a partitioned queue of
// three partitions (orders.p1 holding the backlog, orders.p2 without a
// consumer, orders.p1.dlq with dead letters) and an ordered one whose
// partitions say their active consumer (a classic one as
// single_active_consumer_tag, a quorum one as ..._ctag, as RabbitMQ
// 3.10.8 writes them), beside a plain service.
const cannedPartitions = `[
 {"name":"billing","type":"classic","state":"running","node":"rabbit@a","messages":1,"messages_ready":1,"messages_unacknowledged":0,"consumers":1},
 {"name":"billing.dlq","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p0","type":"quorum","state":"running","leader":"rabbit@a","node":"rabbit@a","messages":2,"messages_ready":1,"messages_unacknowledged":1,"messages_dlx":0,"consumers":1,
  "message_stats":{"publish_details":{"rate":1.5},"deliver_get_details":{"rate":1.5}}},
 {"name":"orders.p0.dlq","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p0.parked","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p0.retry.40s","type":"classic","state":"running","node":"rabbit@a","messages":3,"messages_ready":3,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p1","type":"quorum","state":"running","leader":"rabbit@b","node":"rabbit@b","messages":900,"messages_ready":898,"messages_unacknowledged":2,"messages_dlx":0,"consumers":1,
  "message_stats":{"publish_details":{"rate":40.0},"deliver_get_details":{"rate":2.5}}},
 {"name":"orders.p1.dlq","type":"classic","state":"running","node":"rabbit@b","messages":6,"messages_ready":6,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p1.parked","type":"classic","state":"running","node":"rabbit@b","messages":1,"messages_ready":1,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p1.retry.40s","type":"classic","state":"running","node":"rabbit@b","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p2","type":"quorum","state":"running","leader":"rabbit@c","node":"rabbit@c","messages":5,"messages_ready":5,"messages_unacknowledged":0,"messages_dlx":0,"consumers":0},
 {"name":"orders.p2.dlq","type":"classic","state":"running","node":"rabbit@c","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p2.parked","type":"classic","state":"running","node":"rabbit@c","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.p2.retry.40s","type":"classic","state":"running","node":"rabbit@c","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"ledger.p0","type":"classic","state":"running","node":"rabbit@a","arguments":{"x-single-active-consumer":true},"single_active_consumer_tag":"acemq-ledger.p0-1",
  "messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":2},
 {"name":"ledger.p0.dlq","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"ledger.p1","type":"quorum","state":"running","leader":"rabbit@a","arguments":{"x-single-active-consumer":true,"x-queue-type":"quorum"},"single_active_consumer_ctag":"acemq-ledger.p1-\u001b[2J",
  "messages":0,"messages_ready":0,"messages_unacknowledged":0,"messages_dlx":0,"consumers":2},
 {"name":"ledger.p1.dlq","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"ledger.p2","type":"classic","state":"idle","arguments":{"x-single-active-consumer":true}},
 {"name":"ledger.p2.dlq","type":"classic","state":"running","node":"rabbit@a","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0}
]`

func TestStatusPartitions(t *testing.T) {
	t.Parallel()
	srv := managementAPI(t, "prod", cannedPartitions)
	code, out, errOut := cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL)
	want := "vhost prod, from the management API at " + srv.URL + `: 3 services
QUEUE          MESSAGES  READY  UNACKED  DEAD-LETTERING  CONSUMERS  IN/S  OUT/S  STATE
billing        1         1      0        0               1          -     -      running
  billing.dlq  0         0      0        0               0          -     -      running

PARTITIONED QUEUE               READY  UNACKED  CONSUMERS  DLQ  PARKED  RETRYING  IN/S  OUT/S  NODE      ACTIVE CONSUMER          STATE
ledger (3 partitions, ordered)  ?      ?        ?          0    -       -         -     -      rabbit@a                           2 running, 1 idle
  ledger.p0                     0      0        2          0    -       -         -     -      rabbit@a  acemq-ledger.p0-1        running
  ledger.p1                     0      0        2          0    -       -         -     -      rabbit@a  acemq-ledger.p1-\x1b[2J  running
  ledger.p2                     ?      ?        ?          0    -       -         -     -      -         ?                        idle
orders (3 partitions)           904    3        2          6    1       3         41.5  4.0    3 nodes                            running
  orders.p0                     1      1        1          0    0       3         1.5   1.5    rabbit@a                           running
  orders.p1                     898    2        1          6    1       0         40.0  2.5    rabbit@b                           running
  orders.p2                     5      0        0          0    0       0         -     -      rabbit@c                           running

No consumer on orders.p2, while other partitions of orders have one: the messages there wait while the rest are served. A server consumes every partition of the queue it serves, so this one lost its consumer (its channel closed: see the server's log).

1 queue not sampled yet (? in the partitioned queues' table): the management API lists a queue at once and samples its counts every few seconds (collect_statistics_interval); run status again.
`
	if code != 0 || out != want || errOut != "" {
		t.Errorf("status %d\n%s\nwant\n%s\nstderr: %s", code, out, want, errOut)
	}

	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--queue", "orders.p1.dlq", "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if len(got.Services) != 1 {
		t.Fatalf("%s", out)
	}
	s := got.Services[0]
	if s.Queue != "orders" || len(s.Partitions) != 3 || s.Queues != nil || s.Totals == nil ||
		*s.Totals.Ready != 904 || *s.Totals.DLQ != 6 || *s.Totals.Parked != 1 || *s.Totals.Retrying != 3 || *s.Totals.Consumers != 2 || *s.Totals.PublishRate != 41.5 {
		t.Errorf("%+v\n%s", s, out)
	}
	p1 := s.Partitions[1]
	if p1.Index != 1 || p1.Queue != "orders.p1" || len(p1.Queues) != 4 || p1.Queues[1].Name != "orders.p1.dlq" || *p1.Counts.Ready != 898 || *p1.Counts.DLQ != 6 || p1.Queues[0].Node != "rabbit@b" {
		t.Errorf("%+v", p1)
	}
	if strings.Contains(out, `"queues": null`) {
		t.Errorf("a partitioned service has no queues of its own:\n%s", out)
	}
	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--queue", "ledger", "--json")
	got = statusOut{}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	l := got.Services[0]
	if l.Queue != "ledger" || l.Partitions[0].Counts.ActiveConsumer != "acemq-ledger.p0-1" || !l.Partitions[1].Queues[0].SingleActiveConsumer ||
		l.Partitions[2].Counts.NotSampledYet != 1 || l.Totals.Ready != nil || l.Totals.NotSampledYet != 1 {
		t.Errorf("%+v", l)
	}
}

// TestStatusPartitionsWithoutManagement: by passive declare, --queue
// orders finds orders.p0, orders.p1, ... up to the first that is not
// there, and says nothing of an orders that never was.
func TestStatusPartitionsWithoutManagement(t *testing.T) {
	t.Parallel()
	b, dial := partitionedBroker(t, "orders", 3)
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	seedDeadLetter(t, conn, "orders.p1", "m-1", "exhausted 5 attempts: timeout", b.Clock().Now())
	addr := closedPort(t)
	code, out, errOut := cli(t, dial, "status", "--url", "amqp://ops:pw@"+addr+"/prod", "--management", "http://"+addr, "--queue", "orders", "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	if len(got.Services) != 1 || len(got.Services[0].Partitions) != 3 || *got.Services[0].Totals.DLQ != 1 || got.Services[0].Partitions[1].Counts.DLQ == nil || *got.Services[0].Partitions[1].Counts.DLQ != 1 {
		t.Fatalf("%s", out)
	}
	code, out, _ = cli(t, dial, "status", "--url", "amqp://ops:pw@"+addr+"/prod", "--management", "http://"+addr, "--queue", "orders")
	if code != 0 || !strings.Contains(out, "\norders (3 partitions)  0      -        0          1    0       -  ") || !strings.Contains(out, "\n  orders.p2  ") || strings.Contains(out, "missing") {
		t.Errorf("%d\n%s", code, out)
	}
	names := []string{}
	for _, p := range got.Services[0].Partitions {
		for _, q := range p.Queues {
			names = append(names, q.Name)
		}
	}
	if want := []string{"orders.p0", "orders.p0.dlq", "orders.p0.parked", "orders.p1", "orders.p1.dlq", "orders.p1.parked", "orders.p2", "orders.p2.dlq", "orders.p2.parked"}; !slices.Equal(names, want) {
		t.Errorf("%v, want %v", names, want)
	}
}

// partitionedBroker is a memory broker with a partitioned queue of n
// partitions declared as a Server declares them: each partition's
// topology.
func partitionedBroker(t *testing.T, queue string, n int) (*memory.Broker, dialer) {
	t.Helper()
	b := memory.New()
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	for _, p := range (acemq.Partitioned{Queue: queue, Count: n}).Queues() {
		if err := conn.Declare(context.Background(), acemq.Topology(p, retry.None(), nil)); err != nil {
			t.Fatal(err)
		}
	}
	return b, func(context.Context, string) (transport.Transport, error) { return b.Connect(), nil }
}

// TestTriagePartitions: acemq triage orders.dlq on a partitioned orders
// (no orders.dlq) reads every partition's .dlq, groups their dead letters
// together, says which partition holds how many, and a replay sends each
// back to its own partition.
func TestTriagePartitions(t *testing.T) {
	t.Parallel()
	b, dial := partitionedBroker(t, "orders", 3)
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	created := b.Clock().Now().Add(-time.Hour)
	for _, m := range []struct{ partition, id, reason string }{
		{"orders.p0", "a-1", "exhausted 5 attempts: HTTP 503"},
		{"orders.p1", "b-1", "exhausted 5 attempts: HTTP 503"},
		{"orders.p1", "b-2", `the handler rejected it: no such customer "c-9"`},
		{"orders.p1", "b-3", "exhausted 5 attempts: HTTP 503"},
		{"orders.p2", "c-1", `the handler rejected it: no such customer "c-3"`},
	} {
		seedDeadLetter(t, conn, m.partition, m.id, m.reason, created)
	}
	for _, name := range []string{"orders.dlq", "orders.p*.dlq"} {
		code, out, errOut := cli(t, dial, "triage", name, "--url", "amqp://localhost", "--json")
		var got triageOut
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("%s: %d %v\n%s%s", name, code, err, out, errOut)
		}
		if got.Depth != 5 || got.Read != 5 || len(got.Groups) != 2 || len(got.Partitions) != 3 || got.Partitions[1] != (triageSource{Queue: "orders.p1.dlq", Depth: 3, Read: 3}) {
			t.Fatalf("%s: %s", name, out)
		}
		ex := got.Groups[0]
		if ex.Count != 3 || ex.SampleQueue != "orders.p0.dlq" || !slices.Equal(ex.Queues, []triage.QueueCount{{Queue: "orders.p0.dlq", Count: 1}, {Queue: "orders.p1.dlq", Count: 2}}) {
			t.Errorf("%s: %+v", name, ex)
		}
	}
	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost")
	for _, want := range []string{
		"orders.dlq: 3 partitions (orders.p0.dlq .. orders.p2.dlq), 5 ready, read 5 in 2 groups (none consumed)\n",
		"\n  in:      orders.p0.dlq 1, orders.p1.dlq 2\n",
		"\n  in:      orders.p1.dlq 1, orders.p2.dlq 1\n",
		"  sample:  a-1 in orders.p0.dlq  {",
		"act on a group: acemq triage orders.dlq --replay GROUP",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%d: no %q in\n%s%s", code, want, out, errOut)
		}
	}

	g := triage.ID("exhausted <n> attempts: HTTP 503")
	code, out, errOut = cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--replay", g)
	want := "orders.p0.dlq: group " + g + ", 1 message when read: 1 replayed to orders.p0, 0 left\n" +
		"orders.p0.dlq: 1 message ready before, 0 after\n" +
		"orders.p1.dlq: group " + g + ", 2 messages when read: 2 replayed to orders.p1, 0 left\n" +
		"orders.p1.dlq: 3 messages ready before, 1 after\n" +
		"orders.dlq: group " + g + ", 3 messages in 2 partitions when read: 3 replayed, each to its own partition's queue, 0 left; in those, 4 messages ready before, 1 after\n"
	if code != 0 || out != want {
		t.Errorf("replay: %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	for q, ids := range map[string][]string{"orders.p0": {"a-1"}, "orders.p1": {"b-1", "b-3"}, "orders.p2": nil} {
		if got := drainIDs(t, conn, q); !slices.Equal(got, ids) {
			t.Errorf("%s holds %v, want %v: each message back in its own partition", q, got, ids)
		}
	}

	// A discard into one archive, with --limit counted over the set: one
	// moved, from the first partition that holds the group; the next is
	// not reached.
	r := triage.ID(`the handler rejected it: no such customer "<q>"`)
	code, out, errOut = cli(t, dial, "triage", "orders.p*.dlq", "--url", "amqp://localhost", "--discard", r, "--why", "test customers", "--operator", "alice", "--to-queue", "orders.archive", "--limit", "1", "--json")
	var res actionOut
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
		t.Fatalf("discard: %d %v\n%s%s", code, err, out, errOut)
	}
	if res.Moved != 1 || res.Matched != 2 || res.Left != 1 || len(res.Partitions) != 2 || res.Partitions[0].Queue != "orders.p1.dlq" || res.Partitions[0].Moved != 1 ||
		res.Partitions[1].Queue != "orders.p2.dlq" || res.Partitions[1].Moved != 0 || res.Partitions[1].Left != 1 || res.To != "orders.archive" {
		t.Errorf("discard: %s", out)
	}
	d, ok, err := conn.Get(context.Background(), "orders.archive")
	if err != nil || !ok || d.Headers[HeaderArchivedFrom] != "orders.p1.dlq" || acemq.EnvelopeOf(d).ID != "b-2" {
		t.Fatalf("archive: %v %v %+v", ok, err, d.Headers)
	}
	_ = d.Ack()

	// No partition has the queue named: said.
	code, _, errOut = cli(t, dial, "triage", "payments.p*.dlq", "--url", "amqp://localhost")
	if code != 1 || !strings.Contains(errOut, "no partition of payments has a .dlq queue (payments.p0.dlq is not there)") {
		t.Errorf("%d %s", code, errOut)
	}
}
