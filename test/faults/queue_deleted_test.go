package faults_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestFaultWorkQueueDeleted is issue 15's item 7: the work queue of a
// server that may declare is taken from under it while messages flow.
//
//   - Queue deleted: the broker cancels the consumer, the server logs it,
//     declares the queue again and consumes it again, and every message
//     published after the deletion is handled. The messages the deleted
//     queue held are gone by the operator's hand: counted apart, never as
//     lost, and no more than the queue held (queue.delete-ok's count) and
//     the server had been sent (the prefetch).
//   - Permissions cleared (and the vhost's connections closed, since
//     RabbitMQ checks them only at connecting and consuming): Run returns
//     the broker's refusal (530, access refused), not "transport closed",
//     and promptly, though PublishTimeout is 2 minutes: a copy's publish
//     whose connection the broker refuses to reopen for good gives up at
//     once, its original goes back (the broker requeues it as the
//     connection died). Once the operator gives them back, a new server
//     handles the rest.
//   - Permissions cleared, the connections left open: RabbitMQ lets a
//     channel go on with what it was allowed (it caches the checks), and
//     refuses a new channel's publish with 403. The server either handles
//     the backlog while the broker lets it, or Run ends with the 403,
//     within 30 s either way; never a loss.
//
// Every wait is held in the process: a copy waiting on a rung when the
// queue goes would expire into a binding that went with it, a loss the
// accounting could not tell from ours.
func TestFaultWorkQueueDeleted(t *testing.T) {
	t.Parallel()
	const name = "work-queue-deleted"
	url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log, logs := observedLogger(t)
	q := "faults." + name
	pol := retry.Exponential(4, 100*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(0)
	const prefetch = 32
	l := newLedger()
	tr := dial(t, url, log)
	pubTr := dial(t, url, log)
	// Far above the 30 s within which Run must end once its permissions
	// are cleared: a copy's publish must not wait out its timeout for a
	// connection the broker refuses to reopen for good.
	const publishTimeout = 2 * time.Minute
	run := serve(t, tr, q, &acemq.Server{Retry: pol, Prefetch: prefetch, PublishTimeout: publishTimeout},
		l.handler(20*time.Millisecond), log)

	// The queue deleted, with a backlog and retries under way.
	stats := &publishStats{}
	before := publishAll(t, pubTr, q, jobs(name+"-before", 300), 4, 0, stats)
	var held int
	if err := raw(url, func(ch *amqp.Channel) (err error) {
		held, err = ch.QueueDelete(q, false, false, false)
		return err
	}); err != nil {
		t.Fatalf("delete %s: %v", q, err)
	}
	after := publishAll(t, pubTr, q, jobs(name+"-after", 300), 2, 5*time.Millisecond, stats)
	t.Logf("%s: producer: %s (unroutable until the queue is back)", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(l, after)) {
		t.Errorf("%s: what was published after the deletion is not settled within 60s", name)
	}
	time.Sleep(time.Second) // the last retries of what survived, held 400 ms at most
	// One line says the broker ended the consumer: "declaring the queue
	// again and consuming it again", or, when handlers still ran on it,
	// "the queue is declared again, and consumed again once the handlers
	// still running return" (rejoin.go).
	resumed := logs.FilterMessageSnippet("acemq: the broker ended the consumer; ").All()
	if len(resumed) != 1 || !strings.Contains(errorField(resumed[0]), transport.ErrCancelled.Error()) {
		t.Errorf("log of the broker's cancel: %v, want one line with %q", entries(resumed), transport.ErrCancelled)
	}
	if n := logs.FilterMessage("acemq: consuming the queue again").Len(); n != 1 {
		t.Errorf("%d log lines say the queue is consumed again, want 1", n)
	}
	tl := sk.collect(t, name, nil, l.acceptedCopy(), pol)
	tl.published = append(surviving(tl, before), after...)
	gone := len(before) + len(after) - len(tl.published)
	t.Logf("%s: the deleted queue held %d ready messages; %d of the %d published before the deletion went with it, by the operator's hand, not lost",
		name, held, gone, len(before))
	if gone > held+prefetch {
		t.Errorf("%d messages published before the deletion are found nowhere, more than the %d the queue held and the %d it had sent the server",
			gone, held, prefetch)
	}
	tl.report(t)
	// One would do; the subscription the broker cancelled keeps its own.
	t.Logf("%s: %d connections consume %s", name, consumeConnections(t, vh, q), q)

	// Permissions cleared under it, a backlog again, the connections closed.
	fresh := func() *running {
		return serve(t, dial(t, url, log), q, &acemq.Server{Retry: pol, Prefetch: prefetch, PublishTimeout: publishTimeout},
			l.handler(20*time.Millisecond), log)
	}
	withdraw(t, name+"-permissions", url, vh, q, pubTr, l, pol, run, true, fresh)
	// And again with the connections left open.
	withdraw(t, name+"-permissions-open", url, vh, q, pubTr, l, pol, fresh(), false, fresh)
}

// withdraw publishes a backlog to q, which run consumes, clears guest's
// permissions on vhost (closing its connections if closeConns) and checks
// how Run ends: with the broker's refusal, well before PublishTimeout. With
// the connections left open RabbitMQ may let the server go on (a channel
// caches what it was allowed): then it handles the backlog, and is
// stopped. Once the permissions are back, a server from fresh handles the
// rest and every id is accounted for.
func withdraw(t *testing.T, name, url, vh, q string, pubTr transport.Transport, l *ledger, pol retry.Policy,
	run *running, closeConns bool, fresh func() *running) {
	t.Helper()
	js := publishAll(t, pubTr, q, jobs(name, 200), 4, 0, &publishStats{})
	brokertest.Ctl(t, "", "clear_permissions", "-p", vh, "guest")
	if closeConns {
		brokertest.Ctl(t, "", "close_all_connections", "-p", vh, "acemq faults: permissions cleared")
	}
	cleared := time.Now()
	// A detection bound, not a speed assertion: PublishTimeout is 2 minutes.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case err := <-run.done:
			run.done <- err
			waiting = false
			t.Logf("%s: permissions cleared: Run returned after %s: %v", name, time.Since(cleared).Round(time.Millisecond), err)
			switch {
			case !errors.Is(err, transport.ErrAccessRefused):
				t.Errorf("Run with its permissions cleared = %v, want the broker's refusal (ErrAccessRefused)", err)
			case closeConns && !strings.Contains(err.Error(), "530"), !strings.Contains(err.Error(), "530") && !strings.Contains(err.Error(), "403"):
				t.Errorf("Run with its permissions cleared = %v, want the broker's reply code (530 or 403)", err)
			case errors.Is(err, transport.ErrClosed):
				t.Errorf("Run with its permissions cleared = %v: not 'transport closed'", err)
			}
		case <-tick.C:
			// With its connections open the server may go on with what the
			// broker still lets its channels do, to the end of the backlog.
			if !closeConns && l.allAccepted(js) {
				waiting = false
				t.Logf("%s: permissions cleared, connections open: the server handled the backlog within %s (the broker lets its channels go on); stopped: %v",
					name, time.Since(cleared).Round(time.Millisecond), run.stop(t))
			}
		case <-deadline:
			t.Fatalf("%s: Run still running 30s after its permissions were cleared (connections closed: %v), the backlog not handled", name, closeConns)
		}
	}
	brokertest.Ctl(t, "", "set_permissions", "-p", vh, "guest", ".*", ".*", ".*")
	again := fresh()
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(l, js)) {
		t.Errorf("%s: not settled within 60s after the permissions came back", name)
	}
	if err := again.stop(t); err != nil {
		t.Errorf("Run after the permissions came back: %v", err)
	}
	sk.collect(t, name, js, l.acceptedCopy(), pol).report(t)
}

// consumeConnections counts the connections on vhost named (as dial and
// the transport name them) for consuming queue.
func consumeConnections(tb testing.TB, vhost, queue string) int {
	tb.Helper()
	out := brokertest.Ctl(tb, "", "list_connections", "-p", vhost, "--no-table-headers", "client_properties")
	return strings.Count(out, " consume "+queue+`"}`)
}

// surviving returns the jobs of js that tl finds anywhere.
func surviving(tl *tally, js []job) []job {
	var out []job
	for _, j := range js {
		if tl.accepted[j.ID]+tl.dlq[j.ID]+tl.parked[j.ID]+tl.queued[j.ID] > 0 {
			out = append(out, j)
		}
	}
	return out
}

func errorField(e observer.LoggedEntry) string {
	s, _ := e.ContextMap()["error"].(string)
	return s
}

func entries(es []observer.LoggedEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message + " " + errorField(e)
	}
	return out
}
