package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// TestFaultConnectionLimit is issue 23's item 3: a server consuming many
// queues, each on a connection of its own (the amqp transport's default),
// loses every consumer's connection while the vhost's max-connections is
// at the count that remains, so RabbitMQ refuses each reconnect with 530
// "connection limit (N) is reached". Before, Run returned 0.1 s after the
// first refusal and every queue stopped. Now: Run goes on, CheckReady
// says not ready with the broker's words while the limit holds, the
// refusals are counted, and once the limit is lifted some seconds later
// every queue is consumed again and every message is accounted for.
func TestFaultConnectionLimit(t *testing.T) {
	t.Parallel()
	const (
		name     = "connection-limit"
		nQueues  = 60
		perQueue = 25
		refusal  = 8 * time.Second // how long the limit holds after the kill
	)
	base, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	// The vhost is this test's alone, and deleted at its end with its
	// limits; a failure before the lift lifts them first all the same.
	t.Cleanup(func() { brokertest.Ctl(t, "", "set_vhost_limits", "-p", vh, `{"max-connections": -1}`) })
	log, logs := observedLogger(t)
	pol := testPolicy()
	tr := dial(t, base, log)
	pubTr := dial(t, base, log)
	met := newMetrics()

	queues := make([]string, nQueues)
	sinks := make([]*sink, nQueues)
	mux := acemq.NewMux()
	l := newLedger()
	for i := range queues {
		queues[i] = fmt.Sprintf("faults.%s.q%02d", name, i)
		sinks[i] = newSink(base, queues[i])
		mux.Handle(queues[i], l.handler(time.Millisecond))
	}
	srv := &acemq.Server{Retry: pol, Handler: mux, MeterProvider: met.provider}
	run := serve(t, tr, queues[nQueues-1], srv, nil, log)
	polltest.Within(t, 60*time.Second, "every queue consumed", func() bool {
		for _, q := range queues {
			if info, err := tr.Inspect(context.Background(), q); err != nil || info.Consumers == 0 {
				return false
			}
		}
		return srv.CheckReady() == nil
	})

	// Messages flow before, during and after the refusal: one producer
	// publishing a steady stream across every queue.
	var all []job
	dest := map[string]string{}
	for i, q := range queues {
		for _, j := range jobs(fmt.Sprintf("%s-q%02d", name, i), perQueue) {
			all = append(all, j)
			dest[j.ID] = q
		}
	}
	stats := &publishStats{}
	sent := make(chan []job, 1)
	go func() {
		sent <- publishEach(t, pubTr, all, 4, 20*time.Millisecond, stats, nil, func(_ int, j job) acemq.Outgoing {
			return acemq.Outgoing{RoutingKey: dest[j.ID], ID: j.ID, Body: body(j), ContentType: "application/json"}
		})
	}()
	polltest.Within(t, 60*time.Second, "messages flowing", func() bool { return l.totalCalls() > 200 })

	// The vhost's limit at what remains once the consumers' connections
	// are gone: each of their reconnects finds it reached.
	mg := managementOf(t, base)
	var conns []conn
	var consumerConns []string
	// The management API lists a connection once its stats are emitted
	// (every 5 s by default).
	if !polltest.Until(60*time.Second, func() bool {
		conns, consumerConns = mg.connections(t, vh), nil
		for _, c := range conns {
			if strings.Contains(c.UserProvided, " consume faults."+name+".") {
				consumerConns = append(consumerConns, c.Name)
			}
		}
		return len(consumerConns) == nQueues && len(conns) == nQueues+4
	}) {
		t.Fatalf("%d consumer connections of %d in the vhost, want one per queue (%d) and 4 more (two transports' consume and publish)", len(consumerConns), len(conns), nQueues)
	}
	limit := len(conns) - len(consumerConns)
	brokertest.Ctl(t, "", "set_vhost_limits", "-p", vh, fmt.Sprintf(`{"max-connections": %d}`, limit))
	var wg sync.WaitGroup
	for _, c := range consumerConns {
		wg.Go(func() { mg.closeConnection(t, c) })
	}
	wg.Wait()
	killed := time.Now()

	var notReady error
	polltest.Within(t, 30*time.Second, "CheckReady reports the refusal", func() bool {
		notReady = srv.CheckReady()
		return notReady != nil && strings.Contains(notReady.Error(), "connection limit")
	})
	t.Logf("during the refusal: %v", notReady)
	for time.Since(killed) < refusal {
		select {
		case err := <-run.done:
			run.done <- err
			t.Fatalf("Run returned %s after the consumers' connections were refused: %v", time.Since(killed).Round(time.Millisecond), err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := srv.CheckReady(); err == nil {
			t.Fatalf("CheckReady says ready %s into the refusal, with the limit still at %d", time.Since(killed).Round(time.Millisecond), limit)
		}
	}
	refusals := met.counter(t, acemq.MetricRefusals, map[string]string{"reason": "connection_limit"})
	if refusals < nQueues {
		t.Errorf("%s{reason=connection_limit} = %d, want at least one per queue (%d)", acemq.MetricRefusals, refusals, nQueues)
	}
	streakLines := logs.FilterMessageSnippet("refuses the consumer's connection for now").Len()
	if streakLines != 1 {
		t.Errorf("%d log lines for the streak's start, want 1 (not a line per queue or per try)", streakLines)
	}

	brokertest.Ctl(t, "", "set_vhost_limits", "-p", vh, `{"max-connections": -1}`)
	lifted := time.Now()
	polltest.Within(t, 60*time.Second, "ready again after the limit was lifted", func() bool { return srv.CheckReady() == nil })
	t.Logf("ready again %s after the limit was lifted; %d refusals counted, %d log lines for the streak", time.Since(lifted).Round(time.Millisecond), refusals, streakLines)

	published := <-sent
	polltest.Within(t, 120*time.Second, "every message settled", func() bool {
		settled := true
		for _, sk := range sinks {
			var mine []job
			for _, j := range published {
				if dest[j.ID] == sk.queue {
					mine = append(mine, j)
				}
			}
			if !sk.settled(l, mine)() {
				settled = false
			}
		}
		return settled
	})
	select {
	case err := <-run.done:
		run.done <- err
		t.Fatalf("Run returned: %v", err)
	default:
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run after Shutdown: %v", err)
	}
	var tl *tally
	accepted := l.acceptedCopy()
	for _, sk := range sinks {
		var mine []job
		ours := map[string]int{} // each tally its queue's acceptances: merge adds them up
		for _, j := range published {
			if dest[j.ID] == sk.queue {
				mine = append(mine, j)
				ours[j.ID] = accepted[j.ID]
			}
		}
		one := sk.collect(t, name, mine, ours, pol)
		if tl == nil {
			tl = one
		} else {
			tl.merge(one)
		}
	}
	tl.report(t)
	t.Logf("publishing: %s", stats)
}

// management is the shared node's management API, reached with the
// broker URL's user (the node's default port, as acemq status does).
type management struct {
	base       string
	user, pass string
}

func managementOf(tb testing.TB, amqpURL string) management {
	tb.Helper()
	u, err := url.Parse(amqpURL)
	if err != nil {
		tb.Fatal(err)
	}
	pass, _ := u.User.Password()
	return management{base: "http://" + u.Hostname() + ":15672", user: u.User.Username(), pass: pass}
}

func (m management) do(tb testing.TB, method, path string) *http.Response {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, m.base+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.SetBasicAuth(m.user, m.pass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

// conn is a client connection as the management API lists it: its name
// (the peer addresses) and the name the client gave it.
type conn struct {
	Name         string `json:"name"`
	UserProvided string `json:"user_provided_name"`
}

// connections lists the vhost's client connections.
func (m management) connections(tb testing.TB, vhost string) []conn {
	tb.Helper()
	res := m.do(tb, http.MethodGet, "/api/vhosts/"+url.PathEscape(vhost)+"/connections?columns=name,user_provided_name")
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("list connections of %s: %s", vhost, res.Status)
	}
	var rows []conn
	if err := json.NewDecoder(res.Body).Decode(&rows); err != nil {
		tb.Fatal(err)
	}
	return rows
}

// closeConnection closes one client connection, as an operator does from
// the management UI (320 CONNECTION_FORCED).
func (m management) closeConnection(tb testing.TB, name string) {
	tb.Helper()
	res := m.do(tb, http.MethodDelete, "/api/connections/"+url.PathEscape(name))
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNotFound {
		tb.Errorf("close connection %q: %s", name, res.Status)
	}
}
