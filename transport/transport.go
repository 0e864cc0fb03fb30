// Package transport is the contract between the acemq server and a broker.
//
// Two implementations ship: transport/memory, an in-process broker that
// behaves like RabbitMQ (with a virtual clock for tests), and transport/amqp
// on amqp091-go. transport/transporttest is the conformance suite both pass;
// where the memory transport disagrees with RabbitMQ, the memory transport
// is wrong.
//
// # Header values
//
// Header values are those of AMQP field tables: bool, integers (int, int8 to
// int64), float32/float64, string, []byte, time.Time, nested tables as
// map[string]any, arrays as []any, and nil (AMQP's void field). A transport hands received headers back
// in those types, nested tables included, so code reading them does not care
// which transport delivered the message. Integers come back at a width the
// transport chooses (an int is sent as int32 or int64): read them with a type
// switch, never a bare .(int).
package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Transport is what the server needs from a broker. Every method is safe for
// concurrent use.
type Transport interface {
	// Declare applies t in order (exchanges, queues, bindings, then exchange
	// bindings) and stops
	// at the first refusal, which it returns (ErrPreconditionFailed for an
	// inequivalent redeclare, ErrAccessRefused without configure rights). A
	// refusal kills only the channel it was made on.
	Declare(ctx context.Context, t Topology) error
	// Inspect checks a queue passively; a missing queue is ErrNotFound.
	Inspect(ctx context.Context, queue string) (QueueInfo, error)
	// Publish returns once the broker confirmed p. An unroutable mandatory
	// publish is confirmed with Routed false and no error; without Mandatory
	// the broker does not say, and Routed is true. A nack is ErrNacked; a
	// confirm that never came (the channel closed, ctx ended first) is
	// ErrUnconfirmed: the outcome is unknown. A missing exchange is
	// ErrNotFound; a connection the broker blocked (memory or disk alarm) is
	// ErrBlocked, at once.
	Publish(ctx context.Context, p Publishing) (Confirmation, error)
	// Consume subscribes to queue. A missing queue is ErrNotFound.
	Consume(ctx context.Context, queue string, opts ConsumeOptions) (Subscription, error)
	// Get takes one message from queue without auto-ack (basic.get); ok is
	// false when the queue is empty. The caller settles the delivery.
	Get(ctx context.Context, queue string) (d Delivery, ok bool, err error)
	// Close releases every connection and channel; unsettled deliveries go
	// back to the broker.
	Close() error
}

// Subscription is one consumer on one queue.
type Subscription interface {
	// Deliveries yields the queue's messages. It is closed after Cancel once
	// the broker has stopped delivering, or when the subscription closes.
	Deliveries() <-chan Delivery
	// Cancel stops new deliveries (basic.cancel). Deliveries already received
	// stay settleable until Close.
	Cancel(ctx context.Context) error
	// Close releases the subscription's channel; its unsettled deliveries go
	// back to the queue, marked redelivered.
	Close() error
	// Err says why Deliveries closed when neither Cancel nor Close asked
	// for it, in the broker's words: ErrCancelled (the queue was deleted),
	// ErrNotFound or ErrAccessRefused (a vhost or permission gone),
	// ErrConsumerTimeout, ErrClosed. Nil while the subscription runs and
	// after a Cancel or Close.
	Err() error
}

// Ended is implemented by subscriptions that say when they ended: Ended
// is closed once Deliveries is closed (what it still buffers may be read
// after), so that a caller whose readers are all busy learns that the
// broker cancelled the consumer (the queue deleted) without receiving.
type Ended interface {
	Ended() <-chan struct{}
}

// ConsumeOptions tune a subscription.
type ConsumeOptions struct {
	// Prefetch bounds the unsettled deliveries (basic.qos). Zero means 1.
	Prefetch int
	// Tag names the consumer; empty lets the transport choose.
	Tag string
	// SingleActive says the queue is single-active-consumer
	// (x-single-active-consumer, as an ordered queue is declared), so the
	// subscription takes up to Prefetch from its first delivery, without
	// the amqp transport's probation: the probation's second consumer
	// would register behind every other consumer of the queue and never
	// be active, leaving the subscription at one delivery at a time. The
	// price is the probation's protection: a process that dies holding
	// Prefetch deliveries has each of them counted against a quorum
	// queue's delivery limit, not only the one that killed it.
	SingleActive bool
	// OnConsumerTimeout, when set, is told each time the broker closes the
	// subscription's channel because a delivery stayed unacknowledged past
	// its consumer timeout (RabbitMQ's consumer_timeout: 406
	// PRECONDITION_FAILED), with the timeout the broker says it used; 0
	// when it did not say. Every delivery received on that channel is
	// stale by then, and the broker redelivers each: the call comes before
	// the subscription consumes again, so before any of them can come back
	// to it. It runs on the transport's goroutine: it must return promptly
	// and not call the transport.
	OnConsumerTimeout func(timeout time.Duration)
	// OnRefused, when set, is told each time the broker refuses for now to
	// (re)connect the subscription's connection (a connection limit
	// reached, a vhost down, a node not accepting connections), with an
	// error that wraps ErrRefused and is a *RefusedError; and with nil
	// once the subscription is connected again. Such a refusal never ends
	// the subscription: the transport dials again with backoff, Deliveries
	// stays open and Err nil. It runs on the transport's goroutine: it
	// must return promptly and not call the transport.
	OnRefused func(err error)
}

// Properties are a message's AMQP basic properties.
type Properties struct {
	ContentType     string
	ContentEncoding string
	DeliveryMode    uint8 // 2 is persistent; the library always publishes persistent
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string // per-message TTL; the library never sets it
	MessageID       string
	Timestamp       time.Time
	Type            string
	UserID          string
	AppID           string
}

// Publishing is one message to publish.
type Publishing struct {
	Exchange   string // "" is the default exchange: RoutingKey names a queue
	RoutingKey string
	// Mandatory asks the broker to return the message when no queue took it.
	Mandatory bool
	Headers   map[string]any
	Properties
	Body []byte
}

// Confirmation is the broker's answer to a publish.
type Confirmation struct {
	// Routed is false when a mandatory publish reached no queue.
	Routed bool
}

// Delivery is one message received from a queue.
type Delivery struct {
	Queue       string // the queue it was consumed from
	Exchange    string // the exchange it was last published to
	RoutingKey  string
	Redelivered bool
	Headers     map[string]any
	Properties
	Body []byte
	// Acknowledger settles the delivery on the channel it arrived on.
	Acknowledger Acknowledger
}

// Ack acknowledges the delivery. A Delivery with no Acknowledger (a zero
// value, a peeked copy) is ErrStaleDelivery.
func (d Delivery) Ack() error {
	if d.Acknowledger == nil {
		return ErrStaleDelivery
	}
	return d.Acknowledger.Ack()
}

// Reject rejects the delivery; with requeue false the queue's dead-letter
// exchange, if any, takes it.
func (d Delivery) Reject(requeue bool) error {
	if d.Acknowledger == nil {
		return ErrStaleDelivery
	}
	return d.Acknowledger.Reject(requeue)
}

// Acknowledger settles one delivery. Settling twice, or after the channel it
// arrived on is gone, is ErrStaleDelivery.
type Acknowledger interface {
	Ack() error
	Reject(requeue bool) error
}

// Exchange is an exchange declaration.
type Exchange struct {
	Name    string
	Kind    string // "direct", "fanout", "topic", "headers"
	Durable bool
	Args    map[string]any // alternate-exchange
}

// Queue is a queue declaration.
type Queue struct {
	Name    string
	Durable bool
	// Exclusive queues belong to the connection that declared them and go
	// with it: no other connection may declare, inspect, consume from or
	// delete one (ErrResourceLocked), though anyone may publish to it. A
	// transport does not declare one again after a reconnect: its owner
	// does, if it still wants it. The owner is the connection Declare and
	// Inspect use; a transport that consumes on connections of their own
	// (the amqp transport's WithConnectionPerConsumer) cannot consume
	// from it.
	Exclusive bool
	Args      map[string]any // x-message-ttl, x-dead-letter-exchange, x-queue-type, ...
	// Home, when positive, asks a transport that knows several nodes of
	// one cluster to declare the queue through node Home-1 modulo their
	// number (the amqp transport counts its URLs in sorted order, so that
	// servers given them in different orders agree): RabbitMQ's default
	// leader locator is client-local, so a queue declared without
	// x-queue-leader-locator (or x-queue-master-locator) is led by that
	// node. It is how a partitioned queue's partitions are spread over a
	// cluster: partition i has Home i+1 (its .dlq, .parked and rungs have
	// none). Zero is any node; a transport that knows one node ignores
	// it, and so does a declare of a queue that exists already (its
	// leader stays where it is).
	Home int
}

// Binding binds Queue to Exchange with Key.
type Binding struct {
	Queue    string
	Exchange string
	Key      string
}

// ExchangeBinding binds exchange Destination to exchange Source with Key
// (exchange.bind): what Source routes with a matching key, Destination
// routes on.
type ExchangeBinding struct {
	Destination string
	Source      string
	Key         string
}

// Topology is a set of declarations, applied in order: exchanges, queues,
// bindings, then exchange bindings.
type Topology struct {
	Exchanges        []Exchange
	Queues           []Queue
	Bindings         []Binding
	ExchangeBindings []ExchangeBinding
}

// QueueInfo is what a passive declare reports.
type QueueInfo struct {
	Name      string
	Messages  int // ready messages
	Consumers int
}

// QueueDeleter is implemented by transports that can delete a queue
// (queue.delete): its messages go with it, and its consumers are
// cancelled. A queue that is not there is no error; another connection's
// exclusive queue is ErrResourceLocked.
type QueueDeleter interface {
	DeleteQueue(ctx context.Context, queue string) error
}

// Clock tells time. The memory transport's virtual clock implements it, so
// that the server's in-process waits move when a test advances time.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

// Versioned is implemented by transports that know the broker's product
// and version (RabbitMQ's server properties), so that a server declares
// only what the broker supports: the delay queues are quorum queues with
// at-least-once dead-lettering from RabbitMQ 3.10 on, classic queues
// before.
type Versioned interface {
	BrokerVersion(ctx context.Context) (product, version string, err error)
}

// Checker is implemented by transports that can say whether they are fit
// to work now, for a readiness probe: connected, and not blocked by the
// broker (a memory or disk alarm). Check returns nil when they are.
type Checker interface {
	Check() error
}

// Clustered is implemented by transports that may talk to a cluster:
// Nodes is the number of broker nodes they were given (the amqp
// transport's URLs). Above one, a server warns where a quorum queue's
// retries wait on classic rungs, which a node lost or cut off drops
// from. One is no proof of a single node: a load balancer may front a
// cluster.
type Clustered interface {
	Nodes() int
}

// Clocked is implemented by transports that carry their own clock; a server
// on such a transport tells time by it.
type Clocked interface {
	Clock() Clock
}

// Errors a transport returns, for callers to branch on with errors.Is.
var (
	ErrNotFound           = errors.New("acemq: not found")               // 404: queue or exchange missing
	ErrPreconditionFailed = errors.New("acemq: precondition failed")     // 406: inequivalent redeclare
	ErrAccessRefused      = errors.New("acemq: access refused")          // 403: no permission
	ErrResourceLocked     = errors.New("acemq: resource locked")         // 405: another connection's exclusive queue
	ErrNacked             = errors.New("acemq: publish nacked")          // the broker refused the message
	ErrUnconfirmed        = errors.New("acemq: publish outcome unknown") // no confirm came
	ErrBlocked            = errors.New("acemq: connection blocked by the broker")
	// ErrStalled: the broker accepts publishes and confirms none of them
	// (a node cut off from its cluster's majority, a quorum queue without
	// a leader); a Checker says so while it lasts. A publish refused with
	// it was not sent: the transport lets one publish at a time through
	// while stalled, to learn when the broker answers again, and refuses
	// the others, as for ErrBlocked.
	ErrStalled       = errors.New("acemq: broker stalled")
	ErrStaleDelivery = errors.New("acemq: delivery already settled or its channel is gone")
	ErrClosed        = errors.New("acemq: transport closed")
	// ErrTooLarge: a publish refused before any frame was written, because
	// AMQP or a client could not carry it (see LimitError). Nothing was
	// sent and no connection was harmed.
	ErrTooLarge = errors.New("acemq: message exceeds an AMQP limit")
	// ErrCancelled: the broker cancelled a consumer (basic.cancel): its
	// queue was deleted, or the queue's node went away.
	ErrCancelled = errors.New("acemq: the broker cancelled the consumer")
	// ErrConsumerTimeout: the broker closed a consumer's channel because a
	// delivery stayed unacknowledged past its consumer_timeout.
	ErrConsumerTimeout = errors.New("acemq: a delivery outlived the broker's consumer timeout")
	// ErrRefused: the broker refused a connection for now (a connection
	// limit reached, a vhost down, a node booting or in maintenance); it
	// will take it later, and the transport dials again with backoff. A
	// refusal for good (the vhost deleted, access refused) is ErrNotFound
	// or ErrAccessRefused instead. See RefusedError.
	ErrRefused = errors.New("acemq: the broker refuses the connection for now")
)

// LimitError says which AMQP limit a publish would have broken, so that a
// caller can trim the message or set it aside with a reason that names
// it. It matches ErrTooLarge with errors.Is.
type LimitError struct {
	// Field is what was too large: "message-id", "correlation-id" (any
	// short-string property by its AMQP name), "headers" (the encoded table
	// with the properties, against the frame size), "header-depth",
	// "header-entries", or a header's name for a value too long to write.
	Field string
	Size  int // how large it was: bytes, levels or entries
	Limit int // what fits
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("acemq: %s is %d, over the limit of %d", e.Field, e.Size, e.Limit)
}

// Is makes a LimitError match ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// RefusedError is a refusal for now (it matches ErrRefused with
// errors.Is): why, in a closed set of words a metric can carry, and in
// the broker's own.
type RefusedError struct {
	// Cause names the refusal: "connection_limit" (the vhost's
	// max-connections), "user_connection_limit", "node_connection_limit",
	// "vhost_down" (the vhost not running on the node), or
	// "node_not_accepting" (no listener: the node is booting, stopped or in
	// maintenance).
	Cause string
	// Reason is the broker's words: "NOT_ALLOWED - access to vhost 'v'
	// refused for user 'u': connection limit (200) is reached (530)".
	Reason string
	// Tries counts the attempts refused in a row so far; Since is the
	// first of them.
	Tries int
	Since time.Time
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("acemq: the broker refuses the connection for now (%s, %d attempt(s) since %s): %s",
		e.Cause, e.Tries, e.Since.UTC().Format(time.RFC3339), e.Reason)
}

// Is makes a RefusedError match ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }
