package faults_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
)

// Looking closer than the accounting does: what the library logged, and
// the set-aside messages whole (reason, headers, properties), for the
// scenarios of issue 15, where how a message ended matters as much as
// where.

// observedLogger is testLogger whose entries the test can also read.
func observedLogger(tb testing.TB) (*zap.Logger, *observer.ObservedLogs) {
	tb.Helper()
	core, logs := observer.New(zap.InfoLevel)
	return zap.New(zapcore.NewTee(testLogger(tb).Core(), core)), logs
}

// connectionsLost counts the connections lost whose name (as dial names
// them: "acemq-faults <test> publish", "... consume", "... consume
// <queue>") ends with suffix.
func connectionsLost(logs *observer.ObservedLogs, suffix string) int {
	n := 0
	for _, e := range logs.FilterMessage("acemq: connection lost, reconnecting").All() {
		if c, _ := e.ContextMap()["connection"].(string); strings.HasSuffix(c, suffix) {
			n++
		}
	}
	return n
}

// takeAll takes every message from queue, acknowledging each, and returns
// them whole; a missing queue holds nothing.
func takeAll(url, queue string) ([]amqp.Delivery, error) {
	var got []amqp.Delivery
	err := raw(url, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(queue, false)
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return nil
			}
			if err != nil || !ok {
				return err
			}
			got = append(got, d)
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	})
	return got, err
}

// shelf takes a queue's .dlq and .parked whole as they fill, where a sink
// keeps only the ids.
type shelf struct {
	url, queue  string
	mu          sync.Mutex
	dlq, parked []amqp.Delivery
}

func newShelf(url, queue string) *shelf { return &shelf{url: url, queue: queue} }

func (s *shelf) poll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, _ := takeAll(s.url, acemq.DeadLetterQueue(s.queue))
	p, _ := takeAll(s.url, acemq.ParkedQueue(s.queue))
	s.dlq, s.parked = append(s.dlq, d...), append(s.parked, p...)
}

// settled reports whether every job has reached the end its script
// names, as sink.settled does.
func (s *shelf) settled(l *ledger, js []job) func() bool {
	return func() bool {
		s.poll()
		s.mu.Lock()
		tl := &tally{published: js, accepted: l.acceptedCopy(), dlq: ids(s.dlq), parked: ids(s.parked), queued: map[string]int{}}
		s.mu.Unlock()
		r := tl.result()
		return r.lost == 0 && len(r.unexpected) == 0
	}
}

// find returns the set-aside copy of id, from the .dlq or .parked.
func (s *shelf) find(id string) (d amqp.Delivery, where string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range []struct {
		name string
		ds   []amqp.Delivery
	}{{endDLQ, s.dlq}, {endParked, s.parked}} {
		for _, d := range w.ds {
			if deliveryID(d) == id {
				return d, w.name, true
			}
		}
	}
	return amqp.Delivery{}, "", false
}

// collect is sink.collect with what the shelf took.
func (s *shelf) collect(tb testing.TB, name string, published []job, accepted map[string]int, p retry.Policy) *tally {
	tb.Helper()
	s.poll()
	tl := newSink(s.url, s.queue).collect(tb, name, published, accepted, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	addAll(tl.dlq, ids(s.dlq))
	addAll(tl.parked, ids(s.parked))
	return tl
}

// ids counts deliveries by id.
func ids(ds []amqp.Delivery) map[string]int {
	out := make(map[string]int, len(ds))
	for _, d := range ds {
		out[deliveryID(d)]++
	}
	return out
}

// reasonOf is a set-aside copy's x-acemq-error.
func reasonOf(d amqp.Delivery) string {
	s, _ := d.Headers[acemq.HeaderError].(string)
	return s
}

// acceptedJobs returns n jobs named prefix-0000... that are accepted at
// once.
func acceptedJobs(prefix string, n int) []job {
	out := make([]job, n)
	for i := range out {
		out[i] = job{ID: fmt.Sprintf("%s-%04d", prefix, i)}
	}
	return out
}

// brokerDeath is what the broker itself reads of a message that no
// amqp091-go client can: its x-acemq-id and the reason and queue of its
// latest x-death.
type brokerDeath struct{ id, reason, queue string }

// takeUnreadable takes every message from the classic queue on node ("" is
// the shared one) inside the broker (rabbitmqctl eval, a basic.get without
// ack on the queue's process), for messages amqp091-go cannot read. Their
// ids may hold no space, quote or backslash.
func takeUnreadable(tb testing.TB, node, vhost, queue string) []brokerDeath {
	tb.Helper()
	expr := fmt.Sprintf(`{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<%q>>, queue, <<%q>>)),
Str = fun(H, K) -> case rabbit_misc:table_lookup(H, K) of {longstr, V} -> V; _ -> <<"-">> end end,
Take = fun Take(Acc) ->
  case gen_server2:call(amqqueue:get_pid(Q), {basic_get, self(), true, none}, infinity) of
    empty -> lists:reverse(Acc);
    {ok, _, {_, _, _, _, Msg}} ->
      H = case rabbit_basic:extract_headers(element(4, Msg)) of undefined -> []; L -> L end,
      D = case rabbit_misc:table_lookup(H, <<"x-death">>) of {array, [{table, T} | _]} -> T; _ -> [] end,
      Take([<<(Str(H, <<"x-acemq-id">>))/binary, " ", (Str(D, <<"reason">>))/binary, " ", (Str(D, <<"queue">>))/binary>> | Acc])
  end
end,
Take([]).`, vhost, queue)
	out := brokertest.Ctl(tb, node, "eval", expr)
	var got []brokerDeath
	for _, m := range regexp.MustCompile(`<<"([^"]*)">>`).FindAllStringSubmatch(out, -1) {
		f := strings.Fields(m[1])
		if len(f) != 3 {
			tb.Fatalf("the broker read %q of a message in %s", m[1], queue)
		}
		got = append(got, brokerDeath{id: f[0], reason: f[1], queue: f[2]})
	}
	return got
}
