package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestNext is the fallback table: what the settlement does after a copy's
// publish went one way or another, with no broker. One row per failure
// the fault suite meets (the scenario in test/faults named beside it);
// docs/wire-contract.md ("When a copy cannot be placed") says the same.
func TestNext(t *testing.T) {
	t.Parallel()
	rungs := retry.Exponential(4, 40*time.Second, time.Hour)
	plain := queueFor("orders", rungs)
	ownRoute := queueFor("orders", rungs)
	ownRoute.args = map[string]any{"x-dead-letter-exchange": ""}
	env := wire.Envelope{ID: "m-1", Attempt: 2}
	retryRung := verdict{settle: settleCopy, where: "broker", copy: hop{to: "orders.retry.1m20s", attempt: 3, rung: true, delay: 80 * time.Second}}
	retryDelayed := verdict{settle: settleCopy, where: "delays", copy: hop{to: "orders", attempt: 3, delayed: true, delay: 80 * time.Second}}
	retryInProcess := verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 3, wait: 80 * time.Second}}
	dead := giveUp("orders.dlq", env, "exhausted 2 attempts: boom", "exhausted")
	tooLong := fmt.Errorf("publish: %w", &transport.LimitError{Field: "headers", Size: 140000, Limit: 129016})
	held := func(v verdict) plan { // refused: nacked seven times
		p := start(v)
		for range nackRetries + 1 {
			p, _ = next(plain, env, p, copyNacked, nil, false)
		}
		if !p.holding {
			t.Fatalf("not held after %d nacks: %+v", nackRetries+1, p)
		}
		return p
	}

	tests := []struct {
		name    string
		q       *queueRun
		from    plan
		r       []published // the publishes, in order
		err     error       // of the last one
		tooLong bool        // blocked past the publish timeout, at the last one
		want    turn
		settle  settlement // the plan's after the last publish
		outcome outcome    // when it settles
		pause   pauseKind  // when it publishes again
		check   func(t *testing.T, p plan)
	}{
		{name: "routed retry: ack, counted as a retry", q: plain, from: start(retryRung), r: []published{copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeRetry},
		{name: "routed give-up: ack, counted by its cause", q: plain, from: start(dead), r: []published{copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeExhausted},
		{name: "rung deleted (refusal: queues-deleted): the wait in the process, then the work queue", q: plain, from: start(retryRung), r: []published{copyUnroutable},
			want: turnRungMissing, settle: settleCopy, pause: pauseWait,
			check: func(t *testing.T, p plan) {
				if p.copy != (hop{to: "orders", attempt: 3, wait: 80 * time.Second}) || p.where != "process" || p.pause.d != 80*time.Second || p.tries != 0 {
					t.Errorf("in process instead: %+v", p)
				}
			}},
		{name: "delay level missing (delay_hidden): the wait in the process", q: plain, from: start(retryDelayed), r: []published{copyUnroutable},
			want: turnDelaysMissing, settle: settleCopy, pause: pauseWait},
		{name: ".dlq deleted (setaside_deleted): held, tried again", q: plain, from: start(dead), r: []published{copyUnroutable},
			want: turnHeld, settle: settleCopy, pause: pauseHeld,
			check: func(t *testing.T, p plan) {
				if !p.holding || p.tries != 0 || p.pause.d < 500*time.Millisecond || p.pause.d > time.Second {
					t.Errorf("held: %+v", p)
				}
			}},
		{name: ".dlq deleted, queue with its own dead-letter route (refusal: queues-deleted): rejected to it", q: ownRoute, from: start(dead), r: []published{copyUnroutable},
			want: turnOwnRoute, settle: settleReject, outcome: outcomeOwnRoute},
		{name: "retry waited in the process, its work queue deleted (queue_deleted): held, tried again", q: plain, from: start(retryInProcess), r: []published{copyUnroutable},
			want: turnHeld, settle: settleCopy, pause: pauseHeld,
			check: func(t *testing.T, p plan) {
				if !p.holding || p.copy.to != "orders" || p.copy.attempt != 3 || p.tries != 0 || p.pause.d < 500*time.Millisecond || p.pause.d > time.Second {
					t.Errorf("held for the work queue: %+v", p)
				}
			}},
		{name: "held for its work queue, placed once the queue is declared again (queue_deleted)", q: plain, from: held(retryInProcess), r: []published{copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeRetry},
		{name: "nacked once (cluster leader election): again after 50ms", q: plain, from: start(dead), r: []published{copyNacked},
			want: turnNacked, settle: settleCopy, pause: pauseRepublish,
			check: func(t *testing.T, p plan) {
				if p.pause.d != 50*time.Millisecond || p.nacks != 1 {
					t.Errorf("first nack: %+v", p)
				}
			}},
		{name: "nacked seven times (dlq_full, reject-publish): held", q: plain, from: start(dead),
			r:    []published{copyNacked, copyNacked, copyNacked, copyNacked, copyNacked, copyNacked, copyNacked},
			want: turnHeld, settle: settleCopy, pause: pauseHeld},
		{name: "nacked six times, then placed (a leader elected)", q: plain, from: start(dead),
			r:    []published{copyNacked, copyNacked, copyNacked, copyNacked, copyNacked, copyNacked, copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeExhausted},
		{name: "blocked (blocked, memory alarm): again, backing off", q: plain, from: start(retryRung), r: []published{copyBlocked, copyBlocked, copyBlocked},
			want: turnBlocked, settle: settleCopy, pause: pauseRepublish,
			check: func(t *testing.T, p plan) {
				if p.pause.d != 200*time.Millisecond {
					t.Errorf("third block's pause %v, want 200ms", p.pause.d)
				}
			}},
		{name: "blocked past the publish timeout: given back", q: plain, from: start(retryRung), r: []published{copyBlocked, copyBlocked}, tooLong: true,
			want: turnUnknown, settle: settleGiveBack, outcome: outcomeGivenBack},
		{name: "no confirm (consumer_kill, connection lost): given back", q: plain, from: start(dead), r: []published{copyUnknown},
			want: turnUnknown, settle: settleGiveBack, outcome: outcomeGivenBack},
		{name: "access withdrawn (refusal, vhost_deleted): given back, Run ends", q: plain, from: start(dead), r: []published{copyForGood},
			want: turnForGood, settle: settleGiveBack, outcome: outcomeGivenBack},
		{name: "too large (unwritable): a trimmed copy parked instead", q: plain, from: start(dead), r: []published{copyTooLarge}, err: tooLong,
			want: turnTooLarge, settle: settleCopy,
			check: func(t *testing.T, p plan) {
				if p.copy.to != "orders.parked" || !p.copy.trim || p.cause != "unwritable" || !strings.Contains(p.copy.reason, "headers is 140000") || p.tries != 0 {
					t.Errorf("parked instead: %+v", p)
				}
			}},
		{name: "too large even trimmed: refused, held", q: plain, from: start(unwritable(plain, env, dead, tooLong)), r: []published{copyTooLarge},
			want: turnHeld, settle: settleCopy, pause: pauseHeld},
		{name: "held, still refused: held, backing off", q: plain, from: held(dead), r: []published{copyUnroutable, copyNacked, copyBlocked},
			want: turnStillHeld, settle: settleCopy, pause: pauseHeld,
			check: func(t *testing.T, p plan) {
				if !p.holding || p.tries != 3 || p.pause.d < 4*time.Second || p.pause.d > 8*time.Second {
					t.Errorf("still held after 3 tries: %+v", p)
				}
			}},
		{name: "before the dead letter, its hook failed (a slip's compensation unplaced): held, even with the queue's own route", q: ownRoute, from: start(dead), r: []published{copyHookFailed},
			want: turnHookFailed, settle: settleCopy, pause: pauseHeld,
			check: func(t *testing.T, p plan) {
				if !p.holding || p.tries != 0 || p.pause.d < 500*time.Millisecond || p.pause.d > time.Second {
					t.Errorf("held: %+v", p)
				}
			}},
		{name: "held for its hook, the hook fails again: still held", q: plain, from: held(dead), r: []published{copyHookFailed, copyHookFailed},
			want: turnStillHeld, settle: settleCopy, pause: pauseHeld},
		{name: "held for its hook, then placed", q: plain, from: held(dead), r: []published{copyHookFailed, copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeExhausted},
		{name: "held, then placed (.dlq declared again)", q: plain, from: held(dead), r: []published{copyRouted},
			want: turnPlaced, settle: settleAck, outcome: outcomeExhausted},
		{name: "held, then no confirm: given back", q: plain, from: held(dead), r: []published{copyUnknown},
			want: turnUnknown, settle: settleGiveBack, outcome: outcomeGivenBack},
		{name: "held rung copy, rung gone: the wait in the process", q: plain, from: held(retryRung), r: []published{copyUnroutable},
			want: turnRungMissing, settle: settleCopy, pause: pauseWait,
			check: func(t *testing.T, p plan) {
				if p.holding {
					t.Errorf("still holding: %+v", p)
				}
			}},
		{name: "held, the stop comes (shutdown): given back", q: plain, from: held(dead), r: []published{copyStopped},
			want: turnStopped, settle: settleGiveBack, outcome: outcomeGivenBack},
		{name: "waiting in the process, the broker took it back (consumer_timeout): nothing published, nothing settled", q: plain, from: start(verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 3, wait: time.Hour}}),
			r: []published{copyTakenBack}, want: turnTakenBack, settle: settleDrop, outcome: outcomeGivenBack},
		{name: "held, the broker took it back (consumer_timeout): dropped, the broker delivers it again", q: plain, from: held(dead), r: []published{copyTakenBack},
			want: turnTakenBack, settle: settleDrop, outcome: outcomeGivenBack},
		{name: "republishing, the stop's cut (shutdown_cut): given back", q: plain, from: start(retryRung), r: []published{copyBlocked, copyStopped},
			want: turnStopped, settle: settleGiveBack, outcome: outcomeGivenBack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, turned := tt.from, turn(0)
			for i, r := range tt.r {
				var err error
				if i == len(tt.r)-1 {
					err = tt.err
				}
				p, turned = next(tt.q, env, p, r, err, tt.tooLong && i == len(tt.r)-1)
			}
			if turned != tt.want || p.settle != tt.settle {
				t.Fatalf("turn %d, settle %d; want turn %d, settle %d (%+v)", turned, p.settle, tt.want, tt.settle, p)
			}
			if p.settle != settleCopy && p.outcome != tt.outcome {
				t.Errorf("outcome %v, want %v", p.outcome, tt.outcome)
			}
			if p.settle == settleCopy && p.pause.kind != tt.pause {
				t.Errorf("pause %+v, want kind %d", p.pause, tt.pause)
			}
			if p.settle != settleCopy && p.pause != (pause{}) {
				t.Errorf("a settled plan pauses: %+v", p.pause)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

// TestNextNeverLoopsOnAFailure: whatever the broker answers, a copy either
// settles its original or pauses before its next publish, so no failure
// turns into a hot loop.
func TestNextNeverLoopsOnAFailure(t *testing.T) {
	t.Parallel()
	q := queueFor("orders", retry.Fixed(3, time.Second))
	env := wire.Envelope{ID: "m-1", Attempt: 1}
	for r := copyUnroutable; r <= copyHookFailed; r++ {
		p := start(giveUp(q.deadLetter, env, "x", "rejected"))
		for i := range 50 {
			var tt turn
			p, tt = next(q, env, p, r, errors.New("x"), i > 40)
			if p.settle != settleCopy {
				break
			}
			if p.pause.kind == pauseNone && tt != turnTooLarge {
				t.Fatalf("%d after %d publishes: publishes again at once (turn %d, %+v)", r, i+1, tt, p)
			}
		}
	}
}

// TestWithinBrokerTimeout: a wait in the process longer than the broker
// leaves the original is cut to what it leaves; nothing else changes.
func TestWithinBrokerTimeout(t *testing.T) {
	t.Parallel()
	inProcess := func(d time.Duration) plan {
		return start(verdict{settle: settleCopy, where: "process", copy: hop{to: "orders", attempt: 2, wait: d}})
	}
	tests := []struct {
		name   string
		p      plan
		limit  time.Duration
		want   pause
		capped bool
	}{
		{"within the limit", inProcess(10 * time.Second), 27 * time.Second, pause{d: 10 * time.Second, kind: pauseWait}, false},
		{"over it: cut to it", inProcess(time.Hour), 27 * time.Second, pause{d: 27 * time.Second, kind: pauseWait}, true},
		{"the handler took it all: at once", inProcess(time.Minute), -2 * time.Second, pause{}, true},
		{"a rung's wait is the broker's", start(verdict{settle: settleCopy, where: "broker", copy: hop{to: "orders.retry.1h", rung: true, delay: time.Hour}}), time.Second, pause{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, capped := withinBrokerTimeout(tt.p, tt.limit)
			if got.pause != tt.want || capped != tt.capped {
				t.Fatalf("pause %+v capped %v, want %+v %v", got.pause, capped, tt.want, tt.capped)
			}
			if tt.p.pause.kind == pauseWait && got.copy.wait != got.pause.d {
				t.Errorf("the copy's wait %v, its pause %v: the log and span would say another wait", got.copy.wait, got.pause.d)
			}
		})
	}
}
