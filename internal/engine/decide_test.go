package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestDecide holds the decision to the settlement table of the wire
// contract and the seeds, one row per outcome, with no transport at all.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	boom := errors.New("the warehouse is not answering")
	ladder := retry.Fixed(3, 10*time.Second).WithJitter(0) // waits in the process
	rungs := retry.Exponential(4, 40*time.Second, time.Hour)
	aged := retry.Fixed(5, time.Second).WithJitter(0).WithMaxAge(time.Hour)
	onDelays := rungs.WithJitter(0).WithDelayQueues(true)
	badBody := ack.Park(fmt.Errorf("decode: %w", errors.New("invalid character 'n' looking for beginning of object key string")))

	tests := []struct {
		name    string
		policy  retry.Policy
		noDecl  bool
		noDelay bool // the delay queues are not there
		attempt int
		snoozes int
		age     time.Duration
		answer  ack.Ack
		want    verdict
	}{
		{name: "accept", answer: ack.Accept(), want: verdict{settle: settleAck}},
		{name: "requeue", answer: ack.Requeue(), want: verdict{settle: settleGiveBack, outcome: outcomeRequeue}},
		{name: "retry in process", policy: ladder, attempt: 1, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 2, wait: 10 * time.Second}}},
		{name: "retry on a rung", policy: rungs, attempt: 2, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, where: "broker", copy: hop{to: "orders.retry.1m20s", attempt: 3, rung: true, delay: 80 * time.Second}}},
		{name: "retry on a rung with declare off waits in the process", policy: rungs, noDecl: true, attempt: 1, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 2, wait: 40 * time.Second}}},
		{name: "exhausted", policy: ladder, attempt: 3, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, cause: "exhausted", copy: hop{to: "orders.dlq", attempt: 3, reason: "exhausted 3 attempts: the warehouse is not answering"}}},
		{name: "too old", policy: aged, attempt: 2, age: 2 * time.Hour, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, cause: "too_old", copy: hop{to: "orders.dlq", attempt: 2, reason: "exceeded the maximum message age of 1h0m0s: the warehouse is not answering"}}},
		{name: "no policy", attempt: 1, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, cause: "no_policy", copy: hop{to: "orders.dlq", attempt: 1, reason: "retry requested but no retry policy is set, so one delivery is all it gets: the warehouse is not answering"}}},
		{name: "fatal skips the ladder", policy: ladder, attempt: 1, answer: ack.Retry(fmt.Errorf("charge: %w", ack.Fatal(errors.New("card closed")))),
			want: verdict{settle: settleCopy, cause: "rejected", copy: hop{to: "orders.dlq", attempt: 1, reason: "the handler rejected it: charge: card closed"}}},
		{name: "dead letter", policy: ladder, attempt: 2, answer: ack.DeadLetter(errors.New("no such customer")),
			want: verdict{settle: settleCopy, cause: "rejected", copy: hop{to: "orders.dlq", attempt: 2, reason: "the handler rejected it: no such customer"}}},
		{name: "a URL's password in the reason is hidden", policy: ladder, attempt: 3, answer: ack.Retry(errors.New("dial postgres://svc:hunter2@db:5432/orders: refused")),
			want: verdict{settle: settleCopy, cause: "exhausted", copy: hop{to: "orders.dlq", attempt: 3, reason: "exhausted 3 attempts: dial postgres://svc:xxxxx@db:5432/orders: refused"}}},
		{name: "park", attempt: 1, answer: ack.Park(errors.New("schema v9")),
			want: verdict{settle: settleCopy, cause: "parked", copy: hop{to: "orders.parked", attempt: 1, reason: "the handler parked it: schema v9"}}},
		{name: "decode failure", attempt: 1, answer: badBody,
			want: verdict{settle: settleCopy, cause: "parked", copy: hop{to: "orders.parked", attempt: 1, reason: badBody.Reason()}}},
		{name: "too old by the middleware", attempt: 1, answer: ack.TooOld(time.Minute, boom),
			want: verdict{settle: settleCopy, cause: "too_old", copy: hop{to: "orders.dlq", attempt: 1, reason: "exceeded the maximum message age of 1m0s: the warehouse is not answering"}}},
		{name: "no id of its own: stamped, same attempt, no policy needed", attempt: 2, answer: ack.Retry(fmt.Errorf("idempotency: %w", ErrNeedsID)),
			want: verdict{settle: settleCopy, stamp: true, copy: hop{to: "orders", attempt: 2}}},
		{name: "retry on the delay queues", policy: onDelays, attempt: 2, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, where: "delays", copy: hop{to: "orders", attempt: 3, delayed: true, delay: 80 * time.Second}}},
		{name: "retry on the delay queues without them waits in the process", policy: onDelays, noDelay: true, attempt: 2, answer: ack.Retry(boom),
			want: verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 3, wait: 80 * time.Second}}},
		{name: "retry after a short wait of the handler's", policy: rungs, attempt: 1, answer: ack.RetryAfter(5*time.Second, boom),
			want: verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 2, wait: 5 * time.Second}}},
		{name: "retry after a long wait of the handler's: the delay queues, never a rung", policy: rungs, attempt: 1, answer: ack.RetryAfter(17*time.Minute, boom),
			want: verdict{settle: settleCopy, where: "delays", copy: hop{to: "orders", attempt: 2, delayed: true, delay: 17 * time.Minute}}},
		{name: "retry after spends the last attempt", policy: rungs, attempt: 4, answer: ack.RetryAfter(time.Second, boom),
			want: verdict{settle: settleCopy, cause: "exhausted", copy: hop{to: "orders.dlq", attempt: 4, reason: "exhausted 4 attempts: the warehouse is not answering"}}},
		{name: "retry after past the maximum age", policy: aged, attempt: 1, age: 50 * time.Minute, answer: ack.RetryAfter(15*time.Minute, boom),
			want: verdict{settle: settleCopy, cause: "too_old", copy: hop{to: "orders.dlq", attempt: 1, reason: "exceeded the maximum message age of 1h0m0s: a retry after 15m0s would come back 1h5m0s old: the warehouse is not answering"}}},
		{name: "retry after with no policy", attempt: 1, answer: ack.RetryAfter(time.Minute, boom),
			want: verdict{settle: settleCopy, cause: "no_policy", copy: hop{to: "orders.dlq", attempt: 1, reason: "retry requested but no retry policy is set, so one delivery is all it gets: the warehouse is not answering"}}},
		{name: "a wait longer than the delay queues carry gives up now", policy: rungs, attempt: 1, answer: ack.RetryAfter(delay.Max+time.Second, boom),
			want: verdict{settle: settleCopy, cause: "wait_too_long", copy: hop{to: "orders.dlq", attempt: 1, reason: "asked to wait " + (delay.Max + time.Second).String() + ", longer than the delay queues' longest wait of " + delay.Max.String()}}},
		{name: "snooze keeps the attempt", policy: ladder, attempt: 2, answer: ack.Snooze(6 * time.Hour),
			want: verdict{settle: settleCopy, where: "delays", snooze: true, copy: hop{to: "orders", attempt: 2, snoozes: 1, delayed: true, delay: 6 * time.Hour}}},
		{name: "snooze on the last attempt and with no policy", attempt: 1, snoozes: 4, answer: ack.Snooze(time.Second),
			want: verdict{settle: settleCopy, where: "process", snooze: true, copy: hop{to: "orders", attempt: 1, snoozes: 5, wait: time.Second}}},
		{name: "snooze without the delay queues waits in the process", policy: ladder, noDelay: true, attempt: 1, answer: ack.Snooze(time.Hour),
			want: verdict{settle: settleCopy, where: "process", snooze: true, copy: hop{to: "orders", attempt: 1, snoozes: 1, wait: time.Hour}}},
		{name: "snooze limit", policy: ladder.WithMaxSnoozes(3), attempt: 1, snoozes: 3, answer: ack.Snooze(time.Minute),
			want: verdict{settle: settleCopy, cause: "snooze_limit", copy: hop{to: "orders.dlq", attempt: 1, reason: "snoozed 3 times, the retry policy's limit, and asked to be snoozed for 1m0s again"}}},
		{name: "snooze past the maximum age", policy: aged, attempt: 1, age: 30 * time.Minute, answer: ack.Snooze(time.Hour),
			want: verdict{settle: settleCopy, cause: "too_old", copy: hop{to: "orders.dlq", attempt: 1, reason: "exceeded the maximum message age of 1h0m0s: a snooze after 1h0m0s would come back 1h30m0s old"}}},
		{name: "no answer", policy: ladder, attempt: 1, answer: ack.Ack{},
			want: verdict{settle: settleCopy, cause: "no_answer", copy: hop{to: "orders.dlq", attempt: 1, reason: reasonNoAnswer}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := wire.Envelope{ID: "m-1", Attempt: max(tt.attempt, 1), Snoozes: tt.snoozes, CreatedAt: now.Add(-tt.age), Queue: "orders"}
			q := queueFor("orders", tt.policy)
			q.declare = !tt.noDecl
			q.delays = !tt.noDelay && !tt.noDecl
			got := decide(q, env, tt.answer, now)
			// A retry carries its error for its log line, and nothing else does.
			if isRetry := got.settle == settleCopy && !got.snooze && !got.stamp && got.cause == ""; isRetry != (got.err != nil) ||
				(isRetry && !errors.Is(got.err, boom)) {
				t.Errorf("decide(%v) carries the error %v", tt.answer, got.err)
			}
			got.err = nil
			if got != tt.want {
				t.Errorf("decide(%v) =\n %+v\nwant\n %+v", tt.answer, got, tt.want)
			}
		})
	}
}

// TestDecideRungMissing: a rung copy that reaches no queue becomes the
// same wait in the process, then a copy to the work queue; anything else
// that reaches no queue has no such fall-back.
func TestDecideRungMissing(t *testing.T) {
	t.Parallel()
	q := queueFor("orders", retry.Exponential(4, 40*time.Second, time.Hour))
	now := time.Now()
	x := errors.New("x")
	v := decide(q, wire.Envelope{Attempt: 1, CreatedAt: now}, ack.Retry(x), now)
	got := v.inProcessInstead(q.name)
	want := verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 2, wait: 40 * time.Second}, err: x}
	if got != want {
		t.Errorf("inProcessInstead = %+v, want %+v", got, want)
	}
	if d := decide(q, wire.Envelope{Attempt: 1, CreatedAt: now}, ack.DeadLetter(errors.New("x")), now); d.copy.rung {
		t.Errorf("a dead letter may fall back to a wait: %+v", d)
	}
}

// TestDecideJitterStaysInBounds: the one impurity, the policy's jitter on
// an in-process wait, stays within ±20%.
func TestDecideJitterStaysInBounds(t *testing.T) {
	t.Parallel()
	q := queueFor("orders", retry.Exponential(5, time.Second, time.Minute))
	now := time.Now()
	for range 1000 {
		v := decide(q, wire.Envelope{Attempt: 2, CreatedAt: now}, ack.Retry(errors.New("x")), now)
		if w := v.copy.wait; w < 1600*time.Millisecond || w > 2400*time.Millisecond || v.copy.to != "orders" {
			t.Fatalf("second wait %v to %s, want 2s ±20%% in the process", w, v.copy.to)
		}
	}
}

// TestDecideAgeFromTheFuture: a producer's clock ahead of ours gives a
// negative age, read as zero, never as too old.
func TestDecideAgeFromTheFuture(t *testing.T) {
	t.Parallel()
	q := queueFor("orders", retry.Fixed(3, time.Second).WithMaxAge(time.Minute))
	now := time.Now()
	v := decide(q, wire.Envelope{Attempt: 1, CreatedAt: now.Add(time.Hour)}, ack.Retry(errors.New("x")), now)
	if v.cause != "" || v.copy.to != "orders" {
		t.Errorf("a message from the future: %+v", v)
	}
}

// TestDecideUnwritable: a copy that cannot be written is parked trimmed,
// with a reason that names the limit and what the copy was for.
func TestDecideUnwritable(t *testing.T) {
	t.Parallel()
	q := queueFor("orders", retry.Policy{})
	env := wire.Envelope{Attempt: 3}
	tooLong := fmt.Errorf("publish: %w", &transport.LimitError{Field: "headers", Size: 140000, Limit: 129016})
	dead := giveUp(q.deadLetter, env, "exhausted 3 attempts: boom", "exhausted")
	got := unwritable(q, env, dead, tooLong)
	want := verdict{settle: settleCopy, cause: "unwritable", copy: hop{to: "orders.parked", attempt: 3, trim: true,
		reason: "could not be written: headers is 140000, over the limit of 129016; parked with only the acemq headers, instead of exhausted 3 attempts: boom"}}
	if got != want {
		t.Errorf("unwritable =\n %+v\nwant\n %+v", got, want)
	}
	if r := unwritable(q, env, verdict{copy: hop{to: "orders", attempt: 4}}, tooLong).copy.reason; !strings.HasSuffix(r, "instead of a retry") {
		t.Errorf("a retry's reason: %q", r)
	}
}
