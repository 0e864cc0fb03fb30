package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// cannedQueues is GET /api/queues/prod as RabbitMQ 3.10 answers it, cut to
// the fields status reads: two services, one with rungs and an orphan
// .dlq, the delay queues (level 03 holding two messages waiting to be
// dead-lettered, which RabbitMQ 3.10.8 counts in messages), and queues
// that are not acemq's. payments is listed before its first sample, with
// no count.
const cannedQueues = `[
 {"name":"acemq.delay.v1.00","type":"quorum","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"messages_dlx":0,"consumers":0},
 {"name":"acemq.delay.v1.03","type":"quorum","state":"running","messages":2,"messages_ready":0,"messages_unacknowledged":0,"messages_dlx":2,"consumers":0},
 {"name":"acemq.delay.v1.07","type":"quorum","state":"running","messages":3,"messages_ready":3,"messages_unacknowledged":0,"messages_dlx":0,"consumers":0},
 {"name":"acemq.delay.v1.undeliverable","type":"quorum","state":"running","messages":1,"messages_ready":1,"messages_unacknowledged":0,"messages_dlx":0,"consumers":0},
 {"name":"audit","type":"classic","state":"running","messages":9,"messages_ready":9,"messages_unacknowledged":0,"consumers":1},
 {"name":"billing.dlq","type":"classic","state":"running","messages":2,"messages_ready":2,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders","type":"quorum","state":"running","messages":12,"messages_ready":10,"messages_unacknowledged":2,"consumers":4,
  "message_stats":{"publish":500,"publish_details":{"rate":3.2},"deliver_get":498,"deliver_get_details":{"rate":3.1}}},
 {"name":"orders.dlq","type":"classic","state":"running","messages":6,"messages_ready":6,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.parked","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.retry.1m20s","type":"classic","state":"running","messages":1,"messages_ready":1,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.retry.40s","type":"classic","state":"running","messages":4,"messages_ready":4,"messages_unacknowledged":0,"consumers":0},
 {"name":"orders.retry.later","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0},
 {"name":"payments","type":"classic","state":"idle"},
 {"name":"payments.retry.10s","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0}
]`

func cannedStats(t *testing.T) []queueStat {
	t.Helper()
	var qs []mgmtQueue
	if err := json.Unmarshal([]byte(cannedQueues), &qs); err != nil {
		t.Fatal(err)
	}
	stats := make([]queueStat, 0, len(qs))
	for _, q := range qs {
		stats = append(stats, fromManagement(q))
	}
	return stats
}

func TestStatusGroup(t *testing.T) {
	t.Parallel()
	type want struct {
		services map[string][]string // service -> its queues in order, "!" for a missing one
		delays   []string
		other    []string
	}
	for _, c := range []struct {
		name string
		only []string
		want want
	}{
		{"all", nil, want{
			services: map[string][]string{
				"billing":  {"!billing", "billing.dlq"},
				"orders":   {"orders", "orders.dlq", "orders.parked", "orders.retry.40s", "orders.retry.1m20s"},
				"payments": {"payments", "payments.retry.10s"},
			},
			delays: []string{"acemq.delay.v1.00", "acemq.delay.v1.03", "acemq.delay.v1.07", "acemq.delay.v1.undeliverable"},
			other:  []string{"audit", "orders.retry.later"},
		}},
		{"only orders, named by its dlq", []string{"orders.dlq"}, want{
			services: map[string][]string{"orders": {"orders", "orders.dlq", "orders.parked", "orders.retry.40s", "orders.retry.1m20s"}},
			delays:   []string{"acemq.delay.v1.00", "acemq.delay.v1.03", "acemq.delay.v1.07", "acemq.delay.v1.undeliverable"},
		}},
		{"only a queue with no family", []string{"audit"}, want{
			services: map[string][]string{},
			delays:   []string{"acemq.delay.v1.00", "acemq.delay.v1.03", "acemq.delay.v1.07", "acemq.delay.v1.undeliverable"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			services, delays, other := group(cannedStats(t), c.only)
			got := map[string][]string{}
			var order []string
			for _, s := range services {
				order = append(order, s.Queue)
				for _, q := range s.Queues {
					name := q.Name
					if q.Missing {
						name = "!" + name
					}
					got[s.Queue] = append(got[s.Queue], name)
				}
			}
			if !slices.IsSorted(order) || len(got) != len(c.want.services) {
				t.Errorf("services %v, want %v", order, c.want.services)
			}
			for s, queues := range c.want.services {
				if !slices.Equal(got[s], queues) {
					t.Errorf("%s: %v, want %v", s, got[s], queues)
				}
			}
			var names []string
			for _, d := range delays {
				names = append(names, d.Name)
			}
			if !slices.Equal(names, c.want.delays) || !slices.Equal(other, c.want.other) {
				t.Errorf("delays %v, other %v; want %v, %v", names, other, c.want.delays, c.want.other)
			}
		})
	}
	// Roles and the management API's numbers come through.
	services, _, _ := group(cannedStats(t), []string{"orders"})
	o := services[0].Queues[0]
	if o.Role != roleWork || *o.Messages != 12 || *o.Ready != 10 || *o.Unacked != 2 || *o.Consumers != 4 || *o.PublishRate != 3.2 || *o.DeliverRate != 3.1 || o.Type != "quorum" {
		t.Errorf("orders: %+v", o)
	}
	if r := services[0].Queues[3]; r.Role != roleRung || r.PublishRate != nil {
		t.Errorf("rung: %+v", r)
	}
}

// managementAPI serves canned as GET /api/queues/{vhost} to user ops with
// password pw, in pages of at most two queues when paged.
func managementAPI(t *testing.T, vhost, canned string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "pw" {
			http.Error(w, `{"error":"not_authorised","reason":"Login failed"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.EscapedPath() != "/api/queues/"+strings.ReplaceAll(vhost, "/", "%2F") {
			http.NotFound(w, r)
			return
		}
		var all []json.RawMessage
		if err := json.Unmarshal([]byte(canned), &all); err != nil {
			t.Error(err)
		}
		const size = 2
		page := 1
		if p := r.URL.Query().Get("page"); p != "" {
			page = int(p[0] - '0')
			if len(p) > 1 {
				page = page*10 + int(p[1]-'0')
			}
		}
		from, to := min((page-1)*size, len(all)), min(page*size, len(all))
		_ = json.NewEncoder(w).Encode(map[string]any{"items": all[from:to], "page": page, "page_count": (len(all) + size - 1) / size})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusFromManagementAPI(t *testing.T) {
	t.Parallel()
	srv := managementAPI(t, "prod", cannedQueues)
	code, out, errOut := cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL)
	want := "vhost prod, from the management API at " + srv.URL + `: 3 services, 2 other queues not acemq's
QUEUE                           MESSAGES         READY  UNACKED  DEAD-LETTERING  CONSUMERS  IN/S  OUT/S  STATE
billing                         -                -      -        -               -          -     -      missing
  billing.dlq                   2                2      0        0               0          -     -      running
orders                          12               10     2        -               4          3.2   3.1    running
  orders.dlq                    6                6      0        0               0          -     -      running
  orders.parked                 0                0      0        0               0          -     -      running
  orders.retry.40s              4                4      0        0               0          -     -      running
  orders.retry.1m20s            1                1      0        0               0          -     -      running
payments                        not sampled yet                                  -          -     -      idle
  payments.retry.10s            0                0      0        0               0          -     -      running
acemq.delay.v1.*                5                3      0        2               -          -     -      3 levels
  acemq.delay.v1.03             2                0      0        2               0          -     -      running
  acemq.delay.v1.07             3                3      0        0               0          -     -      running
  acemq.delay.v1.undeliverable  1                1      0        0               0          -     -      running

2 messages waiting to be dead-lettered on acemq.delay.v1.03: their dead-letter target was full or missing, so the queue keeps them, neither ready nor unacked, and RabbitMQ offers them again about every 3 minutes. Never delete a queue that is not empty by every count.

1 queue not sampled yet: the management API lists a queue at once and samples its counts every few seconds (collect_statistics_interval); run status again.
`
	if code != 0 || out != want || errOut != "" {
		t.Errorf("status %d\n%s\nwant\n%s\nstderr: %s", code, out, want, errOut)
	}

	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--queue", "orders", "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.Source != "management API" || len(got.Services) != 1 || len(got.Services[0].Queues) != 5 || got.Other != nil || len(got.Delays) != 4 || got.Unseen != "" {
		t.Errorf("%+v", got)
	}
	if l := got.Delays[1]; l.Name != "acemq.delay.v1.03" || l.DeadLettering == nil || *l.DeadLettering != 2 || *l.Ready != 0 || l.NotSampledYet {
		t.Errorf("level 03: %+v", l)
	}
	// A queue not sampled yet is a field of its own, with no count.
	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--queue", "payments", "--json")
	got = statusOut{}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if p := got.Services[0].Queues[0]; p.Name != "payments" || !p.NotSampledYet || p.Messages != nil || p.Ready != nil || !strings.Contains(out, `"not_sampled_yet": true`) {
		t.Errorf("payments: %+v\n%s", p, out)
	}
	// A service asked for and not there is shown missing.
	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--queue", "shipping", "--queue", "orders")
	if code != 0 || !strings.Contains(out, ": 2 services\n") || !strings.Contains(out, "\nshipping   ") || !strings.Contains(out, "\n  shipping.parked  ") || !strings.Contains(out, "running\nshipping ") {
		t.Errorf("%d\n%s", code, out)
	}

	// Credentials of its own in --management are used and never printed.
	code, out, errOut = cli(t, noBroker, "status", "--url", "amqp://other:secret@rabbit.internal/prod", "--management", strings.Replace(srv.URL, "://", "://ops:pw@", 1))
	if code != 0 || !strings.Contains(out, "3 services") || strings.Contains(out+errOut, "pw@") || strings.Contains(out+errOut, "secret") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	// A wrong password: said, and not printed.
	code, out, errOut = cli(t, noBroker, "status", "--url", "amqp://ops:Wr0ngPass@rabbit.internal/prod", "--management", srv.URL)
	if code != 1 || !strings.Contains(errOut, "(401)") || !strings.Contains(errOut, "set_user_tags") || strings.Contains(out+errOut, "Wr0ngPass") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	// The default vhost, "/", is %2F in the API's path.
	root := managementAPI(t, "/", cannedQueues)
	if code, out, errOut := cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/", "--management", root.URL); code != 0 || !strings.HasPrefix(out, "vhost /, from the management API") {
		t.Errorf("vhost /: %d\n%s%s", code, out, errOut)
	}
	// A vhost the API does not know.
	code, _, errOut = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/staging", "--management", srv.URL)
	if code != 1 || !strings.Contains(errOut, "(404)") {
		t.Errorf("status %d\n%s", code, errOut)
	}
}

// closedPort is a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestStatusWithoutManagement: the API is not there; status says so and
// looks at the named queues by passive declare.
func TestStatusWithoutManagement(t *testing.T) {
	t.Parallel()
	_, dial := memoryBroker(t, "orders", "exhausted 5 attempts: timeout", "exhausted 5 attempts: timeout")
	addr := closedPort(t)
	code, out, errOut := cli(t, dial, "status", "--url", "amqp://ops:pw@"+addr+"/prod", "--management", "http://"+addr, "--queue", "orders.dlq", "--queue", "payments")
	if code != 0 || !strings.Contains(out, "vhost prod, from the passive declares: 2 services\n") || !strings.Contains(out, "  orders.dlq ") ||
		!strings.Contains(errOut, "the management plugin is not reachable at http://"+addr) ||
		!strings.Contains(errOut, "enable it with rabbitmq-plugins enable rabbitmq_management; showing only the queues named") ||
		!strings.Contains(out, "\nunacked messages and messages waiting to be dead-lettered (a quorum queue's messages_dlx) cannot be seen without the management API: a queue with 0 ready may still hold messages; nor can circuit breaker markers (exclusive queues): an open breaker is not shown.\n") {
		t.Errorf("status %d\n%s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = cli(t, dial, "status", "--url", "amqp://ops:pw@"+addr+"/prod", "--management", "http://"+addr, "--queue", "orders", "--queue", "payments", "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.Source != "passive declares" || !strings.Contains(got.ManagementError, "not reachable") || len(got.Services) != 2 || !strings.Contains(got.Unseen, "messages_dlx") {
		t.Fatalf("%+v", got)
	}
	dlq := got.Services[0].Queues[1]
	if dlq.Name != "orders.dlq" || *dlq.Ready != 2 || dlq.Messages != nil || dlq.Unacked != nil {
		t.Errorf("orders.dlq: %+v", dlq)
	}
	for _, q := range got.Services[1].Queues {
		if !q.Missing {
			t.Errorf("payments: %+v", q)
		}
	}
	// Nothing named: nothing to show, and what to do.
	code, _, errOut = cli(t, dial, "status", "--url", "amqp://ops:pw@"+addr+"/prod", "--management", "http://"+addr)
	if code != 1 || !strings.Contains(errOut, "name the queues to show with --queue") {
		t.Errorf("status %d\n%s", code, errOut)
	}
}
