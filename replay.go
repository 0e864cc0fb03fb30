package acemq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// ErrNoReplayTarget matches, with errors.Is, a replay that does not know
// where a message goes back to: the source is neither a .dlq nor a .parked
// queue, no To was given, and the message does not say which queue it was
// first published to.
var ErrNoReplayTarget = errors.New("acemq: no queue to replay to")

// ReplayOptions tune a [Replay]. The zero value moves every message of the
// source back to the queue it was set aside from, restarting its attempts.
type ReplayOptions struct {
	// To is the queue the messages go to, by name. Empty means the queue
	// the source belongs to ("orders" for "orders.dlq" or "orders.parked"),
	// else each message's original queue, if it was published by name.
	To string
	// Limit stops the replay once this many messages have moved; zero or
	// less means no limit. Skipped messages do not count.
	Limit int
	// Deadline stops the replay once this long has passed since it began, by
	// the transport's clock (a memory broker's virtual clock in tests); zero
	// means none. The message being moved when it passes is finished.
	Deadline time.Duration
	// Filter picks the messages to move; the others are skipped and stay
	// in the source in their order. Nil moves every message. It gets the
	// envelope as a handler would see it, and a body it must not keep.
	Filter func(env Envelope, body []byte) bool
	// KeepAttempts puts back exactly what was there: the attempt and the
	// reason stay. By default a replay restarts a message at attempt 1 with
	// no reason, because one that came back on the last attempt of its
	// policy would be dead-lettered again before a handler saw it.
	KeepAttempts bool
	// Progress, when set, is called after every message moved or skipped,
	// with the counts so far (Stopped empty), from the replaying goroutine.
	Progress func(ReplayResult)
	// PublishTimeout bounds the wait for each copy's confirm; zero is
	// DefaultPublishTimeout. Past it the outcome is unknown and the replay
	// stops.
	PublishTimeout time.Duration
	// TracerProvider is where the producer span of each copy goes: a child
	// of the trace context the message carries (its last attempt's), and
	// linked to the one of Replay's ctx, so that the replayed message's
	// next attempt joins its trace. Nil is the global one.
	TracerProvider trace.TracerProvider
	// Propagator reads and writes that trace context; nil is the global
	// one, or W3C trace context while that is otel's default.
	Propagator propagation.TextMapPropagator
}

// ReplayStop says why a replay stopped, because "moved 500" means something
// different when the limit was 500.
type ReplayStop string

// The reasons a replay stops.
const (
	ReplayLimit    ReplayStop = "limit"    // Limit messages moved
	ReplayDeadline ReplayStop = "deadline" // Deadline passed
	ReplayDrained  ReplayStop = "drained"  // the source had nothing more to give
	ReplayFailed   ReplayStop = "error"    // see the error Replay returned
)

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Moved   int // copies confirmed in the target queue, originals acked
	Skipped int // refused by the filter and left in the source
	// Stopped is why the replay ended; empty while it runs.
	Stopped ReplayStop
}

// String reads like "moved 137, skipped 363 (drained)".
func (r ReplayResult) String() string {
	s := "moved " + strconv.Itoa(r.Moved) + ", skipped " + strconv.Itoa(r.Skipped)
	if r.Stopped != "" {
		s += " (" + string(r.Stopped) + ")"
	}
	return s
}

// ReplayError is a message a replay could not move. The original stays in
// the source queue and the replay stops there. Err says why: ErrUnroutable
// (no queue took the copy), transport.ErrNacked, transport.ErrUnconfirmed
// (the copy may have arrived: a duplicate, never a loss), or
// ErrNoReplayTarget.
type ReplayError struct {
	ID   string // x-acemq-id of the message
	From string // the source queue, where the original still is
	To   string // the queue the copy was for; empty with ErrNoReplayTarget
	Err  error
}

func (e *ReplayError) Error() string {
	to := ""
	if e.To != "" {
		to = fmt.Sprintf(" to %q", e.To)
	}
	return fmt.Sprintf("acemq: replay of message %s from %q%s stopped: %v; the original is still in %q",
		e.ID, e.From, to, e.Err, e.From)
}

func (e *ReplayError) Unwrap() error { return e.Err }

// Replay moves messages from the queue from (a dead-letter or parked queue)
// back to where they came from, one at a time: take one (basic.get), publish
// its copy by queue name, mandatory, and wait for the confirm, and only then
// acknowledge the original. The copy keeps the id, the creation time and
// the application's headers, and drops the broker's own (x-death among
// them: a stale x-death naming the target would make RabbitMQ drop the
// message as a dead-letter cycle when it next expires from a rung).
//
// A copy that reaches no queue, is nacked, or whose confirm does not come
// stops the replay with a [*ReplayError]; its original goes back to from.
// Skipped messages are held unacknowledged, so that the next take moves on,
// and given back together at the end, in the order they were taken. A
// classic queue (as Topology declares .dlq and .parked) puts each back in
// its place. A quorum queue without a delivery limit puts them at its back:
// after a drained replay they are still in their order, but a replay that
// stops early leaves them behind the messages it did not reach. While a
// replay runs they show as unacked.
//
// Replay returns the counts and why it stopped; the error is non-nil exactly
// when Stopped is ReplayFailed, and then the counts say how far it got. A
// cancelled ctx stops it before the next message with ctx's error.
func Replay(ctx context.Context, t transport.Transport, from string, opts ReplayOptions) (ReplayResult, error) {
	r := &replayer{t: t, from: from, opts: opts, clock: clockOf(t, nil),
		tracer: telemetry.Tracer(opts.TracerProvider, telemetry.Scope), prop: telemetry.Propagator(opts.Propagator)}
	if opts.To == from && from != "" {
		return ReplayResult{Stopped: ReplayFailed}, fmt.Errorf("acemq: replay from %q to itself would take its own copies again", from)
	}
	res, err := r.run(ctx)
	if gerr := r.giveBack(); gerr != nil {
		err = errors.Join(err, gerr)
	}
	if err != nil {
		res.Stopped = ReplayFailed
	}
	return res, err
}

type replayer struct {
	t     transport.Transport
	from  string
	opts  ReplayOptions
	clock transport.Clock
	held  []transport.Acknowledger // to give back, in the order they were taken
	res   ReplayResult

	tracer trace.Tracer
	prop   telemetry.Propagation
}

func (r *replayer) run(ctx context.Context) (ReplayResult, error) {
	var until time.Time
	if r.opts.Deadline > 0 {
		until = r.clock.Now().Add(r.opts.Deadline)
	}
	for {
		switch {
		case r.opts.Limit > 0 && r.res.Moved >= r.opts.Limit:
			r.res.Stopped = ReplayLimit
			return r.res, nil
		case !until.IsZero() && !r.clock.Now().Before(until):
			r.res.Stopped = ReplayDeadline
			return r.res, nil
		case ctx.Err() != nil:
			return r.res, fmt.Errorf("acemq: replay from %q: %w", r.from, ctx.Err())
		}
		d, ok, err := r.t.Get(ctx, r.from)
		if err != nil {
			return r.res, fmt.Errorf("acemq: replay from %q: %w", r.from, err)
		}
		if !ok {
			r.res.Stopped = ReplayDrained
			return r.res, nil
		}
		m := newMessage(d, r.clock.Now)
		if r.opts.Filter != nil && !r.opts.Filter(m.Envelope(), m.Body()) {
			r.held = append(r.held, d.Acknowledger)
			r.res.Skipped++
		} else if err := r.move(ctx, d, m); err != nil {
			return r.res, err
		}
		if r.opts.Progress != nil {
			r.opts.Progress(r.res)
		}
	}
}

// move copies one message to its target and acks the original once the
// copy is confirmed and routed; otherwise the original goes back.
func (r *replayer) move(ctx context.Context, d transport.Delivery, m *Message) error {
	to := r.target(m)
	fail := func(err error) error {
		// Given back after the skipped ones, so that the order is kept on a
		// quorum queue too, which puts what comes back at its head in turn.
		r.held = append(r.held, d.Acknowledger)
		return &ReplayError{ID: m.ID(), From: r.from, To: to, Err: err}
	}
	if to == "" || to == r.from {
		return fail(fmt.Errorf("%w: it was first published to exchange %q with key %q; give a target queue",
			ErrNoReplayTarget, m.env.Exchange, m.env.RoutingKey))
	}
	attempt, reason := 1, ""
	if r.opts.KeepAttempts {
		attempt, reason = m.Attempt(), m.env.Error
	}
	timeout := r.opts.PublishTimeout
	if timeout <= 0 {
		timeout = DefaultPublishTimeout
	}
	// Not cancelled with the replay: a copy on its way is waited for, so
	// that stopping does not leave a duplicate behind.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	p := wire.Copy(d, wire.Envelope(m.Envelope()), to, attempt, reason)
	pctx, span := telemetry.StartPublish(r.prop.Extract(pctx, d.Headers), r.tracer,
		telemetry.Publish{RoutingKey: to, ID: m.ID(), CorrelationID: p.CorrelationID, BodySize: len(p.Body)},
		telemetry.AttrTo.String(to), telemetry.AttrAttempt.Int(attempt), telemetry.AttrReplayFrom.String(r.from))
	defer span.End()
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && span.IsRecording() {
		span.AddLink(trace.Link{SpanContext: sc}) // the replay's own
	}
	r.prop.Inject(pctx, p.Headers)
	conf, err := r.t.Publish(pctx, p)
	switch {
	case errors.Is(err, transport.ErrNacked):
		telemetry.Fail(span, "", err)
		return fail(err)
	case err != nil:
		telemetry.Fail(span, "", err)
		return fail(fmt.Errorf("%w (the copy may have arrived in %q: a duplicate, never a loss)", err, to))
	case !conf.Routed:
		telemetry.Fail(span, telemetry.Unroutable, ErrUnroutable)
		return fail(ErrUnroutable)
	}
	r.res.Moved++
	if err := d.Ack(); err != nil {
		return &ReplayError{ID: m.ID(), From: r.from, To: to,
			Err: fmt.Errorf("the copy is in %q but the original could not be acknowledged, so it will be delivered from %q again (a duplicate): %w", to, r.from, err)}
	}
	return nil
}

// target is where m goes: To, else the queue the source belongs to, else
// the queue m was first published to by name.
func (r *replayer) target(m *Message) string {
	if r.opts.To != "" {
		return r.opts.To
	}
	if q, ok := sourceOf(r.from); ok {
		return q
	}
	if m.env.Exchange == "" {
		return m.env.RoutingKey
	}
	return ""
}

// giveBack returns the skipped messages, and the one that could not be
// moved, to the source in the order they were taken. One already back (its
// channel closed) is not an error: the broker requeued it itself.
func (r *replayer) giveBack() error {
	var errs []error
	for _, a := range r.held {
		if err := a.Reject(true); err != nil && !errors.Is(err, transport.ErrStaleDelivery) {
			errs = append(errs, err)
		}
	}
	r.held = nil
	if len(errs) > 0 {
		what := fmt.Sprintf("%d messages", len(errs))
		if len(errs) == 1 {
			what = "1 message"
		}
		return fmt.Errorf("acemq: replay from %q: %s could not be given back (the broker returns them when the channel closes): %w",
			r.from, what, errors.Join(errs...))
	}
	return nil
}

// sourceOf returns the queue a dead-letter or parked queue belongs to:
// "orders" for "orders.dlq" and "orders.parked"; false for any other name.
func sourceOf(setAside string) (string, bool) {
	for _, suffix := range []string{DeadLetterQueue(""), ParkedQueue("")} {
		if q, ok := strings.CutSuffix(setAside, suffix); ok && q != "" {
			return q, true
		}
	}
	return "", false
}
