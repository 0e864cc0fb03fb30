package middleware

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/logging"
)

// MetricDuplicates counts the messages [Idempotent] accepted without calling
// the handler because their id was Done, by queue.
const MetricDuplicates = "acemq.idempotency.duplicates"

// MetricInProgress counts the messages [Idempotent] put off without calling
// the handler because their id was InProgress, by queue. A steady rate is
// duplicates delivered while the first copy runs; a burst after a consumer
// crashed is the messages it held, waiting out their leases.
const MetricInProgress = "acemq.idempotency.in_progress"

// DefaultInProgressSnoozes is how many times [Idempotent] snoozes one
// message whose id it finds in progress elsewhere before it retries it
// instead, unless [WithInProgressSnoozes] says otherwise. Each snooze
// waits until the other claim's lease can have ended, so a claim left by
// a killed consumer is outlived by the first; five is for a claim taken
// again and again by live duplicates of the message, about five minutes
// at the default lease.
const DefaultInProgressSnoozes = 5

// leaseSlack is added to the lease left of a claim in progress elsewhere:
// the snoozed message comes back once the lease has ended, not a moment
// before, and a lease that ended between the claim and the question
// (zero left) still waits this long rather than come straight back.
const leaseSlack = time.Second

// settleTimeout bounds a Confirm or Release. They run on a context that the
// handler's cancellation does not reach: a handler cut off by shutdown still
// gets its claim settled.
const settleTimeout = 10 * time.Second

// IdempotentOption configures [Idempotent]. The interface is sealed: the
// options are the shared ones ([WithLogger], [WithMeterProvider]: every
// [Option] is an IdempotentOption) and Idempotent's own,
// [WithDuplicateHook] and [WithInProgressSnoozes].
type IdempotentOption interface{ applyIdempotent(*idempotentConfig) }

type idempotentConfig struct {
	settings
	onDuplicate func(context.Context, *acemq.Message)
	snoozes     int // 0: DefaultInProgressSnoozes; <0: none
}

type idempotentOptionFunc func(*idempotentConfig)

func (f idempotentOptionFunc) applyIdempotent(c *idempotentConfig) { f(c) }

// WithDuplicateHook has [Idempotent] call fn for each duplicate, before
// accepting it, on the consumer's goroutine: keep it quick.
func WithDuplicateHook(fn func(ctx context.Context, m *acemq.Message)) IdempotentOption {
	return idempotentOptionFunc(func(c *idempotentConfig) { c.onDuplicate = fn })
}

// WithInProgressSnoozes sets how many times [Idempotent] snoozes a message
// whose id is in progress elsewhere before it retries it under the
// server's policy instead; [DefaultInProgressSnoozes] unless given. The
// count is the message's x-acemq-snoozes, which a handler's own
// ack.Snooze adds to as well. Zero or less snoozes never: every such
// message is retried at once, spending an attempt, as before snoozing
// was taught.
func WithInProgressSnoozes(n int) IdempotentOption {
	return idempotentOptionFunc(func(c *idempotentConfig) {
		c.snoozes = n
		if n <= 0 {
			c.snoozes = -1
		}
	})
}

// Idempotent keeps a handler from running twice for one message id, as far
// as its store can tell, by the sequence the idempotency package
// describes: Claim the id before the handler, Confirm it when the handler
// accepts, Release it on any other outcome (retry, dead letter, park,
// requeue) and when the handler panics, before the panic goes on.
// Releasing is what lets a retry run at once rather than after the lease.
//
// What the claim finds decides the rest:
//
//   - Claimed: the handler runs, and its answer is returned.
//   - Done: the message was handled. It is accepted without calling the
//     handler, and not silently: it adds one to [MetricDuplicates], calls
//     the hook of [WithDuplicateHook] and logs the id at debug level (to
//     [WithLogger]'s logger).
//   - InProgress: another claim on the id is unsettled and its lease has
//     not ended. The work is not done, and the consumer holding the claim
//     may have died mid-handler, so accepting would lose the message. Nor
//     is the message failing: it waits. It is snoozed (ack.Snooze, which
//     spends no attempt and adds one to x-acemq-snoozes) until the other
//     claim's lease can have ended: the lease left, as the store tells it
//     (idempotency.LeaseReporter; a store that cannot tell is waited out
//     for idempotency.DefaultLease), and a second more. The handler is not
//     called; one is added to [MetricInProgress]; an info line says so,
//     with the wait. When the message comes back, the other claim has been
//     confirmed (it is a duplicate), released or outlived (it is handled),
//     whatever the retry ladder, and on a queue with no retry policy too.
//     A message found in progress on [DefaultInProgressSnoozes] snoozes
//     already ([WithInProgressSnoozes]) is another consumer's claim taken
//     again and again, not a dead one's: it is retried under the server's
//     policy instead, with an error wrapping idempotency.ErrInProgress and
//     the id, and a warning. The ladder then bounds it, and one that ends
//     dead-letters it with "exhausted N attempts: acemq: idempotency:
//     message in progress elsewhere: ...": not lost, and replayable. The
//     policy's own bounds on snoozes (retry.Policy.WithMaxSnoozes) and on
//     age still apply to each snooze, and dead-letter the message with
//     their reasons when passed.
//
// A redelivered message (Envelope().Redelivered) that finds its id
// InProgress waits like any other; it does not take the claim over.
// The flag says the broker lost the consumer of an earlier delivery, not
// that the consumer stopped: a process cut off from the broker by a network
// fault, a broker restart or a forced close goes on running its handler,
// and taking its claim would run the work twice at once, the one thing the
// claim is there to stop. Only the end of the lease says the claimer is
// gone.
//
// A store that fails to Claim (a database that is down, say) makes the
// message a retry in the same way, with the store's error as the reason:
// never an accept. A Confirm that fails is logged and the message still
// accepted: the work is done, and undoing an ack is not possible; the cost
// is that a redelivery of it, once the lease ends, runs the handler again.
// A Release that fails is logged, and leaves the claim standing until its
// lease ends; a retry that comes sooner finds it InProgress and waits for
// that end.
//
// Any id works (see idempotency.Key); a log line or an error shows at most
// the first 128 bytes of one. A message with no id of its own (neither
// x-acemq-id nor a message-id: acemq.Message.IDIsNew) is not claimed: its
// id was made up for this delivery, and a redelivery would get another. It
// is retried with acemq.ErrNeedsID instead, and the server publishes it
// again with that id stamped on (one extra publish, only for such
// messages) before the handler runs.
//
// Put Idempotent after Decode and MaxAge, which settle a message without
// running the work, and before Recover, so a panic reaches it as a retry.
// For handled-once across crashes, claim inside the handler's own
// transaction instead (idempotency.Postgres.ClaimTx); do not combine the two
// on one queue. A nil store panics.
func Idempotent(store idempotency.Store, opts ...IdempotentOption) acemq.Middleware {
	if store == nil {
		panic("acemq: middleware.Idempotent with a nil store")
	}
	var cfg idempotentConfig
	for _, o := range opts {
		if o != nil {
			o.applyIdempotent(&cfg)
		}
	}
	cfg.log = logging.Or(cfg.log)
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	// Creation fails only on an invalid name, and ours is a constant; a
	// failed instrument is a no-op one.
	meter := cfg.mp.Meter("github.com/acemq/acemq/middleware")
	duplicates, _ := meter.Int64Counter(MetricDuplicates,
		metric.WithUnit("{message}"),
		metric.WithDescription("Messages accepted without calling the handler because their id was already handled."))
	inProgress, _ := meter.Int64Counter(MetricInProgress,
		metric.WithUnit("{message}"),
		metric.WithDescription("Messages retried without calling the handler because another claim on their id was in progress."))
	idem := &idempotent{store: store, log: cfg.log, duplicates: duplicates, inProgress: inProgress,
		onDuplicate: cfg.onDuplicate, attrs: make(map[string][]metric.AddOption), snoozes: cfg.snoozes}
	switch {
	case idem.snoozes == 0:
		idem.snoozes = DefaultInProgressSnoozes
	case idem.snoozes < 0:
		idem.snoozes = 0
	}
	idem.leases, _ = store.(idempotency.LeaseReporter)
	// A Memory store never blocks and never reads its context, so the
	// detached, bounded context a settle needs is left out: it is most of
	// what the middleware would otherwise cost per message.
	_, idem.inMemory = store.(*idempotency.Memory)
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			return idem.serve(ctx, m, next)
		})
	}
}

type idempotent struct {
	store       idempotency.Store
	log         *zap.Logger
	duplicates  metric.Int64Counter
	inProgress  metric.Int64Counter
	onDuplicate func(context.Context, *acemq.Message)
	inMemory    bool                      // the store is an *idempotency.Memory
	leases      idempotency.LeaseReporter // the store, when it can say how long a claim holds; else nil
	snoozes     int                       // how many snoozes an in-progress message may have had

	mu    sync.RWMutex
	attrs map[string][]metric.AddOption // built once per queue: Add then allocates nothing
}

func (i *idempotent) serve(ctx context.Context, m *acemq.Message, next acemq.Handler) ack.Ack {
	if m.IDIsNew() {
		// The id was made up for this delivery: a redelivery would get
		// another and run the work again. The server stamps it on first.
		return ack.Retry(acemq.ErrNeedsID)
	}
	claim, err := i.store.Claim(ctx, m.ID())
	switch {
	case err != nil:
		return ack.Retry(fmt.Errorf("acemq: idempotency claim failed, the handler did not run: %w", err))
	case claim == idempotency.Done:
		i.duplicate(ctx, m)
		return ack.Accept()
	case claim == idempotency.InProgress:
		return i.claimedElsewhere(ctx, m)
	case claim != idempotency.Claimed:
		// A Store of someone else's making answered nothing we know: the
		// safe reading of that is not "done".
		return ack.Retry(fmt.Errorf("acemq: idempotency claim of %s answered %v, which is none of claimed, done or in progress; the handler did not run",
			shortID(m.ID()), claim))
	}
	settled := false
	defer func() {
		if !settled { // the handler panicked; the panic goes on after this
			i.release(ctx, m, "panic")
		}
	}()
	a := next.ServeMessage(ctx, m)
	settled = true
	if a.Outcome() == ack.OutcomeAccept {
		i.confirm(ctx, m)
	} else {
		i.release(ctx, m, a.Outcome().String())
	}
	return a
}

func (i *idempotent) duplicate(ctx context.Context, m *acemq.Message) {
	i.duplicates.Add(ctx, 1, i.queueAttrs(m.Queue())...)
	if i.onDuplicate != nil {
		i.onDuplicate(ctx, m)
	}
	if ce := i.log.Check(zap.DebugLevel, "acemq: duplicate accepted without calling the handler"); ce != nil {
		ce.Write(zap.String("queue", m.Queue()), idField(m), zap.Int("attempt", m.Attempt()))
	}
}

// claimedElsewhere is the answer for a message whose id another claim
// holds: a snooze until that claim's lease can have ended, or, past the
// snoozes allowed, a retry.
func (i *idempotent) claimedElsewhere(ctx context.Context, m *acemq.Message) ack.Ack {
	i.inProgress.Add(ctx, 1, i.queueAttrs(m.Queue())...)
	env := m.Envelope()
	if env.Snoozes >= i.snoozes {
		i.log.Warn("acemq: id still in progress elsewhere after its snoozes; retried under the policy, spending an attempt, without calling the handler",
			zap.String("queue", m.Queue()), idField(m), zap.Int("attempt", m.Attempt()), zap.Int("snoozes", env.Snoozes),
			zap.Bool("redelivered", env.Redelivered))
		return ack.Retry(fmt.Errorf("%w: id %s has an unsettled claim whose lease has not ended, after %d snoozes that waited for it to; the handler did not run",
			idempotency.ErrInProgress, shortID(m.ID()), env.Snoozes))
	}
	left, known := i.leaseLeft(ctx, m)
	wait := left + leaseSlack
	if ce := i.log.Check(zap.InfoLevel, "acemq: id in progress elsewhere; snoozed until that claim's lease can have ended, without calling the handler"); ce != nil {
		ce.Write(zap.String("queue", m.Queue()), idField(m), zap.Int("attempt", m.Attempt()),
			zap.Duration("wait", wait), zap.Bool("lease_known", known), zap.Int("snoozes", env.Snoozes),
			zap.Bool("redelivered", env.Redelivered))
	}
	return ack.Snooze(wait)
}

// leaseLeft is how long the claim holding m's id can hold it still: what
// the store says, or a whole default lease when it cannot say (known is
// false then).
func (i *idempotent) leaseLeft(ctx context.Context, m *acemq.Message) (left time.Duration, known bool) {
	if i.leases == nil {
		return idempotency.DefaultLease, false
	}
	left, err := i.leases.LeaseLeft(ctx, m.ID())
	if err != nil {
		i.log.Warn("acemq: idempotency lease unknown; the message waits a whole default lease",
			zap.String("queue", m.Queue()), idField(m), zap.Error(err))
		return idempotency.DefaultLease, false
	}
	return left, true
}

func (i *idempotent) queueAttrs(queue string) []metric.AddOption {
	i.mu.RLock()
	opts, ok := i.attrs[queue]
	i.mu.RUnlock()
	if !ok {
		opts = []metric.AddOption{metric.WithAttributes(attribute.String("queue", queue))}
		i.mu.Lock()
		i.attrs[queue] = opts
		i.mu.Unlock()
	}
	return opts
}

func (i *idempotent) confirm(ctx context.Context, m *acemq.Message) {
	if !i.inMemory {
		var cancel context.CancelFunc
		ctx, cancel = settleContext(ctx)
		defer cancel()
	}
	if err := i.store.Confirm(ctx, m.ID()); err != nil {
		i.log.Error("acemq: idempotency confirm failed; the message is accepted, but a redelivery of it would run the handler again",
			zap.String("queue", m.Queue()), idField(m), zap.Error(err))
	}
}

func (i *idempotent) release(ctx context.Context, m *acemq.Message, outcome string) {
	if !i.inMemory {
		var cancel context.CancelFunc
		ctx, cancel = settleContext(ctx)
		defer cancel()
	}
	if err := i.store.Release(ctx, m.ID()); err != nil {
		i.log.Error("acemq: idempotency release failed; until the claim's lease ends, a retry of this message will be taken for a duplicate",
			zap.String("queue", m.Queue()), idField(m), zap.String("outcome", outcome), zap.Error(err))
	}
}

// settleContext is ctx cut loose from the handler's cancellation and
// bounded by settleTimeout.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// maxLoggedID is how much of a message id a log line shows: ids come from
// publishers, and one of a megabyte should not make a megabyte log line.
const maxLoggedID = 128

// idField is the message id for a log line, cut short past maxLoggedID
// bytes with a note of its full length.
func idField(m *acemq.Message) zap.Field {
	id := m.ID()
	if len(id) > maxLoggedID {
		id = fmt.Sprintf("%s... (%d bytes)", id[:maxLoggedID], len(id))
	}
	return zap.String("id", id)
}

// shortID is id for an error: quoted, so odd bytes show escaped, and cut
// short past maxLoggedID bytes, since the error becomes a dead letter's
// reason header.
func shortID(id string) string {
	if len(id) > maxLoggedID {
		return fmt.Sprintf("%q... (%d bytes)", id[:maxLoggedID], len(id))
	}
	return fmt.Sprintf("%q", id)
}
