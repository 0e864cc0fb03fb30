package memory

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq/transport"
)

// queueArgs are the arguments the broker acts on.
type queueArgs struct {
	quorum   bool
	ttl      time.Duration
	hasTTL   bool
	dlx      string
	hasDLX   bool
	dlrk     string
	hasDLRK  bool
	limit    int64
	hasLimit bool

	maxLen      int64
	hasMaxLen   bool
	maxBytes    int64
	hasMaxBytes bool
	overflow    overflow
	// atLeastOnce: a quorum queue with x-dead-letter-strategy
	// at-least-once under reject-publish (RabbitMQ falls back to at most
	// once under any other overflow).
	atLeastOnce bool
	sac         bool // x-single-active-consumer (singleactive.go)
}

// The arguments RabbitMQ 3.10 compares on a redeclare, per queue type.
var (
	classicArgs = []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
		"x-queue-version", "x-single-active-consumer", "x-queue-type", "x-queue-master-locator",
	}
	quorumArgs = []string{
		"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
		"x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
		"x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	}
)

// declare applies t in order and stops at the first refusal; each
// declaration is atomic, and a refusal changes nothing else.
func (b *Broker) declare(t transport.Topology, c *Conn) error {
	for _, x := range t.Exchanges {
		if err := b.declareExchange(x); err != nil {
			return err
		}
	}
	for _, q := range t.Queues {
		if err := b.declareQueue(q, c); err != nil {
			return err
		}
	}
	for _, bd := range t.Bindings {
		if err := b.bind(bd); err != nil {
			return err
		}
	}
	for _, bd := range t.ExchangeBindings {
		if err := b.bindExchange(bd); err != nil {
			return err
		}
	}
	return nil
}

// bindExchange adds an exchange-to-exchange binding; both must exist, as
// RabbitMQ asks.
func (b *Broker) bindExchange(d transport.ExchangeBinding) error {
	if d.Source == "" || d.Destination == "" {
		return fmt.Errorf("%w: operation not permitted on the default exchange", transport.ErrAccessRefused)
	}
	src, dst := b.exchanges[d.Source], b.exchanges[d.Destination]
	switch {
	case src == nil:
		return fmt.Errorf("%w: no exchange '%s'", transport.ErrNotFound, d.Source)
	case dst == nil:
		return fmt.Errorf("%w: no exchange '%s'", transport.ErrNotFound, d.Destination)
	}
	bd := binding{key: d.Key, x: d.Destination}
	if !slices.Contains(src.onward, bd) {
		src.onward = append(slices.Clip(src.onward), bd)
	}
	return nil
}

func (b *Broker) declareExchange(d transport.Exchange) error {
	switch {
	case d.Name == "":
		return fmt.Errorf("%w: operation not permitted on the default exchange", transport.ErrAccessRefused)
	case strings.HasPrefix(d.Name, "amq."):
		return fmt.Errorf("%w: exchange name '%s' contains reserved prefix 'amq.*'", transport.ErrAccessRefused, d.Name)
	}
	switch d.Kind {
	case kindDirect, kindFanout, kindTopic, kindHeaders:
	default:
		return fmt.Errorf("memory: invalid exchange type '%s' for exchange '%s'", d.Kind, d.Name)
	}
	args, err := normalizeTable(d.Args)
	if err != nil {
		return fmt.Errorf("memory: exchange '%s' arguments: %w", d.Name, err)
	}
	ae, hasAE := args["alternate-exchange"]
	if _, isString := ae.(string); hasAE && !isString {
		// RabbitMQ ignores an alternate-exchange that is not a string;
		// refusing it here catches the mistake sooner.
		return fmt.Errorf("memory: exchange '%s': alternate-exchange must be a string, not %s", d.Name, amqpType(ae))
	}
	if x := b.exchanges[d.Name]; x != nil {
		if x.kind != d.Kind {
			return inequivalent("type", "exchange", d.Name, quote(d.Kind), quote(x.kind))
		}
		if x.durable != d.Durable {
			return inequivalent("durable", "exchange", d.Name, quote(d.Durable), quote(x.durable))
		}
		// RabbitMQ compares alternate-exchange only.
		h, hok := x.args["alternate-exchange"]
		if hasAE != hok || (hasAE && ae != h) {
			return inequivalent("alternate-exchange", "exchange", d.Name, describe(ae, hasAE), describe(h, hok))
		}
		return nil
	}
	x := newExchange(d.Name, d.Kind, d.Durable)
	x.args = args
	x.ae, _ = ae.(string)
	b.exchanges[d.Name] = x
	return nil
}

func (b *Broker) declareQueue(d transport.Queue, c *Conn) error {
	switch {
	case d.Name == "":
		return errors.New("memory: a queue needs a name (server-named queues are not supported)")
	case strings.HasPrefix(d.Name, "amq."):
		return fmt.Errorf("%w: queue name '%s' contains reserved prefix 'amq.*'", transport.ErrAccessRefused, d.Name)
	}
	args, err := normalizeTable(d.Args)
	if err != nil {
		return fmt.Errorf("memory: queue '%s' arguments: %w", d.Name, err)
	}
	parsed, err := parseQueueArgs(d.Name, args)
	if err != nil {
		return err
	}
	if q := b.queues[d.Name]; q != nil {
		if q.owner != ownerOf(d, c) {
			return locked(q) // exclusive.go
		}
		if q.durable != d.Durable {
			return inequivalent("durable", "queue", d.Name, quote(d.Durable), quote(q.durable))
		}
		keys := classicArgs
		if q.quorum {
			keys = quorumArgs
		}
		for _, k := range keys {
			if err := equivalentArg(d.Name, k, args, q.args); err != nil {
				return err
			}
		}
		return nil
	}
	if parsed.quorum && !d.Durable {
		return fmt.Errorf("%w: invalid property 'non-durable' for queue '%s'", transport.ErrPreconditionFailed, d.Name)
	}
	q := &queue{b: b, name: d.Name, durable: d.Durable, owner: ownerOf(d, c), args: args, queueArgs: parsed}
	q.self = []*queue{q}
	b.queues[d.Name] = q
	return nil
}

func (b *Broker) bind(d transport.Binding) error {
	if d.Exchange == "" {
		return fmt.Errorf("%w: operation not permitted on the default exchange", transport.ErrAccessRefused)
	}
	x := b.exchanges[d.Exchange]
	if x == nil {
		return fmt.Errorf("%w: no exchange '%s'", transport.ErrNotFound, d.Exchange)
	}
	q := b.queues[d.Queue]
	if q == nil {
		return fmt.Errorf("%w: no queue '%s'", transport.ErrNotFound, d.Queue)
	}
	x.bind(q, d.Key)
	return nil
}

// parseQueueArgs checks the arguments the broker acts on, refusing what
// RabbitMQ refuses with PRECONDITION_FAILED, in its words (checked against
// 3.10.8, which adds the vhost).
func parseQueueArgs(queue string, args map[string]any) (queueArgs, error) {
	var a queueArgs
	invalid := func(key, why string) error {
		return fmt.Errorf("%w: invalid arg '%s' for queue '%s': %s", transport.ErrPreconditionFailed, key, queue, why)
	}
	if v, ok := args["x-queue-type"]; ok {
		switch v {
		case "classic":
		case "quorum":
			a.quorum = true
		case "stream":
			return a, fmt.Errorf("memory: queue '%s': stream queues are not supported", queue)
		default:
			return a, invalid("x-queue-type", fmt.Sprintf("unsupported queue type %v", v))
		}
	}
	var err error
	nonNegInt := func(key string) (n int64, ok bool) {
		v, ok := args[key]
		if !ok || err != nil {
			return 0, false
		}
		n, isInt := toInt64(v)
		switch {
		case !isInt:
			err = invalid(key, fmt.Sprintf("%q", "expected integer, got "+amqpType(v)))
		case n < 0:
			err = invalid(key, fmt.Sprintf("{value_negative,%d}", n))
		}
		return n, err == nil
	}
	ms, hasTTL := nonNegInt("x-message-ttl")
	a.ttl, a.hasTTL = time.Duration(ms)*time.Millisecond, hasTTL
	a.limit, a.hasLimit = nonNegInt("x-delivery-limit")
	a.hasLimit = a.hasLimit && a.quorum // classic queues of 3.10 have no delivery limit
	a.maxLen, a.hasMaxLen = nonNegInt("x-max-length")
	a.maxBytes, a.hasMaxBytes = nonNegInt("x-max-length-bytes")
	if err != nil {
		return a, err
	}
	if v, ok := args["x-overflow"]; ok {
		s, isString := v.(string)
		if !isString {
			return a, invalid("x-overflow", fmt.Sprintf("{unacceptable_type,%s}", amqpType(v)))
		}
		i := slices.Index(overflowNames[:], s)
		if i < 0 {
			return a, invalid("x-overflow", "invalid_overflow")
		}
		a.overflow = overflow(i)
		if a.quorum && a.overflow == rejectPublishDLX {
			// RabbitMQ 3.10.8 takes it, logs a warning and drops the head.
			a.overflow = dropHead
		}
	}
	if v, ok := args["x-dead-letter-exchange"]; ok {
		if a.dlx, a.hasDLX = v.(string); !a.hasDLX {
			return a, fmt.Errorf("%w: invalid type '%s' for arg 'x-dead-letter-exchange' in queue '%s'",
				transport.ErrPreconditionFailed, amqpType(v), queue)
		}
	}
	if v, ok := args["x-single-active-consumer"]; ok {
		if a.sac, ok = v.(bool); !ok {
			return a, invalid("x-single-active-consumer", fmt.Sprintf("{unacceptable_type,%s}", amqpType(v)))
		}
	}
	a.atLeastOnce = a.quorum && a.overflow == rejectPublish && args["x-dead-letter-strategy"] == "at-least-once"
	if v, ok := args["x-dead-letter-routing-key"]; ok {
		if a.dlrk, a.hasDLRK = v.(string); !a.hasDLRK {
			return a, invalid("x-dead-letter-routing-key", fmt.Sprintf("{unacceptable_type,%s}", amqpType(v)))
		}
		if !a.hasDLX {
			return a, invalid("x-dead-letter-routing-key",
				"Key x-dead-letter-routing-key should be specified only if x-dead-letter-exchange is also specified")
		}
	}
	return a, nil
}

// amqpType is RabbitMQ's name for the field type a normalized value
// travels as, the name its refusals give.
func amqpType(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "signedint"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case time.Time:
		return "timestamp"
	case map[string]any:
		return "table"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// equivalentArg compares one argument of a redeclare with the queue's: all
// integer types are one type, as RabbitMQ compares them.
func equivalentArg(queue, key string, got, have map[string]any) error {
	g, gok := got[key]
	h, hok := have[key]
	if gok == hok && (!gok || sameValue(g, h)) {
		return nil
	}
	return inequivalent(key, "queue", queue, describe(g, gok), describe(h, hok))
}

func sameValue(a, b any) bool {
	if x, ok := toInt64(a); ok {
		y, ok := toInt64(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func describe(v any, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("the value '%v'", v)
}

func quote(v any) string { return fmt.Sprintf("'%v'", v) }

// inequivalent is RabbitMQ's PRECONDITION_FAILED for a redeclare that
// differs from what exists.
func inequivalent(arg, kind, name, received, current string) error {
	return fmt.Errorf("%w: inequivalent arg '%s' for %s '%s': received %s but current is %s",
		transport.ErrPreconditionFailed, arg, kind, name, received, current)
}
