package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/slip"
)

// The routing slip of TestSlipKill: three stops and the compensations of
// the first two, named as in the issue; their queues are the scenario's
// prefix, a dot and the name.
const (
	slipReserve = "stock.reserve"
	slipCharge  = "card.charge"
	slipShip    = "shipping.ship"
	slipRelease = "stock.release"
	slipRefund  = "card.refund"
)

var (
	slipStops         = []string{slipReserve, slipCharge, slipShip}
	slipCompensations = []string{slipRelease, slipRefund}
)

// slipOrder is a slip's payload: the script its stops follow, so that
// consumers in other processes follow the same one.
type slipOrder struct {
	N int `json:"n"`
	// FailAt is the stop (or compensation) that fails the slip for good,
	// fatally, on every attempt.
	FailAt string `json:"failAt,omitempty"`
	// Flaky are the stops and compensations that fail once, on their
	// first attempt, before doing their work: a retry on the ladder.
	Flaky []string `json:"flaky,omitempty"`
}

// slipArgs are what the stops register with their compensations, checked
// by the compensations: what travels in the slip arrives whole.
type slipArgs struct {
	Reservation string `json:"reservation,omitempty"`
	Payment     string `json:"payment,omitempty"`
}

var errSlipFlaky = errors.New("the service blinked (the script fails this first attempt)")

// runSlipConsumer is the consumer process of TestSlipKill
// (TestHelperConsumer's mode "slip"): one server for the three stops and
// the two compensations of the queues named by envQueue's prefix. Every
// stop and compensation does its work at most once per (slip, stop): the
// work (a row in the effects table, "<slip id> <stop>") and the claim of
// the hop's x-acemq-id commit in one transaction
// (idempotency.Postgres.ClaimTx), the arrangement that holds under
// SIGKILL (TestFaultIdempotentConsumerKilled); a redelivered hop whose
// work committed is accepted without doing it again, and the slip goes on.
func runSlipConsumer(t *testing.T, ctx context.Context) {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	tr := dial(t, os.Getenv(envURL), log)
	pool := brokertest.OpenPool(t, os.Getenv(envPostgres), brokertest.PoolConfig{})
	w := slipWorker{store: newStore(t, pool, os.Getenv(envStore)), eff: effects{pool: pool, table: os.Getenv(envEffects)}, prefix: os.Getenv(envQueue)}
	c := &slip.Courier{Publisher: &acemq.Publisher{Transport: tr}}
	mux := acemq.NewMux()
	for _, name := range slipStops {
		mux.Handle(w.queue(name), c.Step(w.step(name)))
	}
	for _, name := range slipCompensations {
		mux.Handle(w.queue(name), c.Compensation(w.undo(name)))
	}
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: testPolicy(), Logger: log, PublishTimeout: 5 * time.Second}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// slipWorker does the stops' work.
type slipWorker struct {
	store  *idempotency.Postgres
	eff    effects
	prefix string
}

func (w slipWorker) queue(name string) string { return w.prefix + "." + name }

// script is what the order says of the stop name on m's attempt: an
// answer other than accept, or ok to do the work.
func (w slipWorker) script(m *acemq.Message, name string) (ack.Ack, bool) {
	var o slipOrder
	if err := json.Unmarshal(m.Body(), &o); err != nil {
		return ack.Park(fmt.Errorf("the order: %w", err)), false
	}
	switch {
	case o.FailAt == name:
		return ack.Retry(ack.Fatal(fmt.Errorf("%s refuses order %d for good (the script)", name, o.N))), false
	case slices.Contains(o.Flaky, name) && m.IsFirstAttempt():
		return ack.Retry(errSlipFlaky), false
	}
	return ack.Ack{}, true
}

func (w slipWorker) step(name string) slip.StepFunc {
	return func(ctx context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
		if a, ok := w.script(m, name); !ok {
			return a
		}
		// What the step adds to the slip is the same on every run of it,
		// the redelivery of work already done included: the slip that
		// goes on must carry the compensation whichever run sends it.
		switch name {
		case slipReserve:
			r := "r-" + s.ID()
			if err := errors.Join(s.SetVar("reservation", r), s.Record(slipArgs{Reservation: r}),
				s.Compensate(w.queue(slipRelease), slipArgs{Reservation: r})); err != nil {
				return ack.Retry(ack.Fatal(err))
			}
		case slipCharge:
			var r string
			if ok, err := s.Var("reservation", &r); !ok || err != nil || r != "r-"+s.ID() {
				return ack.Retry(ack.Fatal(fmt.Errorf("the reservation variable: %q, %v", r, err)))
			}
			p := "p-" + s.ID()
			if err := errors.Join(s.SetVar("payment", p), s.Compensate(w.queue(slipRefund), slipArgs{Payment: p})); err != nil {
				return ack.Retry(ack.Fatal(err))
			}
		case slipShip:
			var p string
			if ok, err := s.Var("payment", &p); !ok || err != nil || p != "p-"+s.ID() {
				return ack.Retry(ack.Fatal(fmt.Errorf("the payment variable: %q, %v", p, err)))
			}
		}
		return w.once(ctx, m.ID(), s.ID()+" "+name)
	}
}

func (w slipWorker) undo(name string) slip.UndoFunc {
	return func(ctx context.Context, m *acemq.Message, u *slip.Undo) ack.Ack {
		if a, ok := w.script(m, name); !ok {
			return a
		}
		var args slipArgs
		if err := u.Args(&args); err != nil {
			return ack.Retry(ack.Fatal(err))
		}
		if (name == slipRelease && args.Reservation != "r-"+u.ID()) || (name == slipRefund && args.Payment != "p-"+u.ID()) {
			return ack.Retry(ack.Fatal(fmt.Errorf("%s: the compensation's arguments %+v are not its stop's", name, args)))
		}
		return w.once(ctx, m.ID(), u.ID()+" "+name)
	}
}

// once does the work effect (a row) in the transaction that claims claim,
// the hop's id; a claim committed before means the work is done: accept.
func (w slipWorker) once(ctx context.Context, claim, effect string) ack.Ack {
	tx, err := w.eff.pool.Begin(ctx)
	if err != nil {
		return ack.Retry(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	res, err := w.store.ClaimTx(ctx, tx, claim)
	switch {
	case err != nil:
		return ack.Retry(err)
	case res == idempotency.Done:
		return ack.Accept()
	case res != idempotency.Claimed:
		return ack.Retry(fmt.Errorf("claim %s: %v", claim, res))
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+w.eff.table+" (id) VALUES ($1)", effect); err != nil {
		return ack.Retry(err)
	}
	time.Sleep(3 * time.Millisecond) // widen the window a kill can land in
	if err := tx.Commit(ctx); err != nil {
		return ack.Retry(err)
	}
	// The work is done, the slip not yet sent on: a kill now is a
	// redelivery of work already done.
	time.Sleep(3 * time.Millisecond)
	return ack.Accept()
}
