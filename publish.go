package acemq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// ErrUnroutable matches, with errors.Is, a mandatory publish that reached no
// queue: the quietest failure AMQP has, made loud.
var ErrUnroutable = errors.New("acemq: message reached no queue")

// PublishError is a publish that did not succeed, with where it was going.
type PublishError struct {
	ID         string
	Exchange   string
	RoutingKey string
	// Unroutable says the broker confirmed the message but no queue took it.
	Unroutable bool
	Err        error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("acemq: publish %s to exchange %q key %q: %v", e.ID, e.Exchange, e.RoutingKey, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// Outgoing is a message a service publishes.
type Outgoing struct {
	// Exchange is where to publish; "" is the default exchange, where
	// RoutingKey names the queue.
	Exchange   string
	RoutingKey string
	Body       []byte
	// ID becomes x-acemq-id; empty gets a new random id. Set it to make a
	// republish of the same business event the same message to idempotent
	// consumers.
	ID            string
	Headers       map[string]any
	ContentType   string
	CorrelationID string
	// Delay delivers the message after it, on the delay infrastructure
	// (package delay, declared with delay.Topology), rounded up to
	// delay.Unit; At delivers it at a time (one in the past is now). Set
	// at most one, and only for the default exchange: RoutingKey names
	// the queue, which must exist at publish time. A Server consuming
	// that queue declares the delay queues and binds the queue to them
	// itself (where it may declare); a queue no Server binds is bound
	// with delay.Bind (or acemq topology --delays --apply --queue), and
	// without the binding its messages still arrive, through
	// delay.Undeliverable, up to RedeliverEvery late.
	Delay time.Duration
	At    time.Time
}

// PublishResult says what the broker did with a message.
type PublishResult struct {
	ID string
	// Confirmed is true once the broker acknowledged the message; Publish
	// never returns before that, so it is false only alongside an error.
	Confirmed bool
	// Routed is false when no queue took the message.
	Routed bool
}

// Publisher publishes with confirms, always: Publish returns only after the
// broker has acknowledged the message. Bulk publishing is concurrent calls
// to Publish, not a way to switch confirms off. A Publisher is safe for
// concurrent use, and must not be copied after its first use.
//
// What an error means for publishing again: one wrapping
// transport.ErrUnconfirmed is an unknown outcome (the message may be in
// its queue, so publishing again may deliver it twice, under the same id
// for a consumer's idempotency store to see); one wrapping
// transport.ErrBlocked or transport.ErrStalled was not sent (a memory
// alarm; a broker that confirms nothing, which the transport lets one
// publish at a time reach), and is safe to publish again after a pause.
type Publisher struct {
	Transport transport.Transport
	// Mandatory makes a message that reaches no queue an error wrapping
	// ErrUnroutable. Without it, PublishResult.Routed still reports the fact.
	Mandatory bool
	// Clock stamps creation times; nil uses the transport's, or the wall clock.
	Clock transport.Clock
	// TracerProvider is where Publish's producer span goes ("publish
	// orders", a child of its ctx); nil is the global one
	// (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Propagator writes the producer span's trace context into the
	// headers, in place of any they carried (headers passed on from a
	// message consumed: the span links to that one), so that the
	// consumer's process span joins the trace. Nil is the global one
	// (otel.GetTextMapPropagator), or W3C trace context while that is
	// otel's default, which propagates nothing.
	Propagator propagation.TextMapPropagator
	// Codec encodes the values PublishValue is given; nil is codec.JSON.
	Codec codec.Codec

	dests destinations // the queues delayed publishes found (publish_destinations.go)
}

// PublishValue publishes v encoded with the publisher's Codec, with the
// codec's content type unless o sets one: the typed way to publish an
// event or a command, read on the other side by acemq.Decoded with the
// same codec. o.Body must be empty. A value the codec refuses is an error
// and nothing is published.
func (p *Publisher) PublishValue(ctx context.Context, o Outgoing, v any) (PublishResult, error) {
	if o.Body != nil {
		return PublishResult{}, errors.New("acemq: PublishValue with a Body as well as a value; set one")
	}
	c := p.Codec
	if c == nil {
		c = codec.JSON
	}
	body, err := c.Marshal(v)
	if err != nil {
		return PublishResult{}, fmt.Errorf("acemq: publish to %q: encode %T: %w", o.RoutingKey, v, err)
	}
	o.Body = body
	if o.ContentType == "" {
		o.ContentType = c.ContentType()
	}
	return p.Publish(ctx, o)
}

// Publish stamps the wire contract's headers (id, attempt 1, creation time),
// publishes o persistently and waits for the broker's confirm, under a
// producer span ("publish {exchange}", or "publish {queue}" on the default
// exchange) whose context the message carries.
func (p *Publisher) Publish(ctx context.Context, o Outgoing) (PublishResult, error) {
	id := o.ID
	if id == "" {
		id = wire.NewID()
	}
	now := clockOf(p.Transport, p.Clock).Now()
	// wire.New asks for mandatory always, so that Routed is known either way.
	pub := wire.New(wire.Origin{ID: id, Created: now, Exchange: o.Exchange, RoutingKey: o.RoutingKey}, o.Headers,
		transport.Properties{ContentType: o.ContentType, CorrelationID: o.CorrelationID}, o.Body)
	ctx, span := telemetry.StartPublish(ctx, telemetry.Tracer(p.TracerProvider, telemetry.Scope),
		telemetry.Publish{Exchange: o.Exchange, RoutingKey: o.RoutingKey, ID: id, CorrelationID: o.CorrelationID, BodySize: len(o.Body)})
	defer span.End()
	prop := telemetry.Propagator(p.Propagator)
	if old := trace.SpanContextFromContext(prop.Extract(context.Background(), o.Headers)); old.IsValid() && span.IsRecording() {
		span.AddLink(trace.Link{SpanContext: old}) // headers passed on from another message: linked, and replaced
	}
	prop.Inject(ctx, pub.Headers)
	res, err := p.publish(ctx, o, id, now, pub)
	if err != nil {
		typ := ""
		if errors.Is(err, ErrUnroutable) {
			typ = telemetry.Unroutable
		}
		telemetry.Fail(span, typ, err)
	}
	return res, err
}

func (p *Publisher) publish(ctx context.Context, o Outgoing, id string, now time.Time, pub transport.Publishing) (PublishResult, error) {
	res := PublishResult{ID: id}
	if o.Delay != 0 || !o.At.IsZero() {
		if err := p.delayed(ctx, o, now, &pub); err != nil {
			return res, &PublishError{ID: id, Exchange: o.Exchange, RoutingKey: o.RoutingKey,
				Unroutable: errors.Is(err, ErrUnroutable), Err: err}
		}
	}
	c, err := p.Transport.Publish(ctx, pub)
	if err != nil {
		return res, &PublishError{ID: id, Exchange: o.Exchange, RoutingKey: o.RoutingKey, Err: err}
	}
	res.Confirmed, res.Routed = true, c.Routed
	if !c.Routed && p.Mandatory {
		return res, &PublishError{ID: id, Exchange: o.Exchange, RoutingKey: o.RoutingKey, Unroutable: true, Err: ErrUnroutable}
	}
	return res, nil
}

// delayed points pub at the delay infrastructure: the level of its delay's
// highest bit, with the delay in its routing key and the due time in
// x-acemq-due. The level exchanges route every message, so the destination
// is checked first: a queue that cannot be reached now is ErrUnroutable,
// as a direct publish to it would be.
func (p *Publisher) delayed(ctx context.Context, o Outgoing, now time.Time, pub *transport.Publishing) error {
	if o.Delay != 0 && !o.At.IsZero() {
		return errors.New("acemq: delayed publish: set Delay or At, not both")
	}
	if o.Exchange != "" {
		return fmt.Errorf("acemq: delayed publish: only to a queue (the default exchange), not exchange %q", o.Exchange)
	}
	d := o.Delay
	if !o.At.IsZero() {
		d = o.At.Sub(now)
	}
	if _, err := delay.RouteTo(o.RoutingKey, d); err != nil {
		return err
	}
	if err := p.checkDestination(ctx, o.RoutingKey); err != nil {
		return err
	}
	_, err := delay.Aim(pub, o.RoutingKey, d, now)
	return err
}

// checkDestination checks that queue exists, unless it was found recently
// (publish_destinations.go).
func (p *Publisher) checkDestination(ctx context.Context, queue string) error {
	now := time.Now()
	if p.dests.known(queue, now) {
		return nil
	}
	if _, err := p.Transport.Inspect(ctx, queue); err != nil {
		if errors.Is(err, transport.ErrNotFound) {
			p.dests.forget(queue)
			return fmt.Errorf("%w: queue %q does not exist: %w", ErrUnroutable, queue, err)
		}
		return fmt.Errorf("acemq: delayed publish: check queue %q: %w", queue, err)
	}
	p.dests.found(queue, now)
	return nil
}

// clockOf picks the clock: the one given, else the transport's own, else
// the wall clock.
func clockOf(t transport.Transport, c transport.Clock) transport.Clock {
	if c != nil {
		return c
	}
	if ct, ok := t.(transport.Clocked); ok {
		return ct.Clock()
	}
	return wallClock{}
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
