package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// The kinds of queue a read can be asked of. A queue that holds what was set
// aside (dead letters, parked messages, an archive) is read by an operator;
// the others are someone's work, and a read takes part in it.
const (
	kindDLQ     = "dead-letter queue"
	kindParked  = "parked queue"
	kindArchive = "archive queue"
	// the others, as status names their roles
	kindWork          = "work queue"
	kindRung          = "retry rung"
	kindDelayLevel    = "delay level"
	kindUndeliverable = "undeliverable delay queue"
)

// archiveSuffix ends the name of an archive queue: triage --discard
// --to-queue and the dashboard's discard form propose Q.dlq.archive, and
// any queue named NAME.archive is read as one.
const archiveSuffix = ".archive"

// defaultQuorumDeliveryLimit is the delivery limit RabbitMQ 4 gives a
// quorum queue that sets none (3.x has none by default).
const defaultQuorumDeliveryLimit = 20

// readCost is what reading a queue without consuming it (basic.get, then
// the message given back) costs. Every such read marks each message read
// redelivered; on a quorum queue with a delivery limit it also counts one
// delivery of each against the limit, and a message past the limit is
// dead-lettered (or dropped) by the broker, with no consumer involved. A
// read of a work queue or a delay level also holds its messages from their
// consumers while it lasts. acemq web, triage, peek and replay ask it
// before they read, and say it.
type readCost struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`           // kindDLQ ... kindUndeliverable
	Type  string `json:"type,omitempty"` // classic, quorum, stream; "" when not known
	// Limit is the delivery limit a read counts against, 0 for none.
	Limit int `json:"delivery_limit,omitempty"`
	// LimitFrom says where Limit comes from: the queue's argument, a
	// policy, RabbitMQ 4's default.
	LimitFrom string `json:"delivery_limit_from,omitempty"`
	// DeadLetterExchange is where a message past Limit goes; "" means the
	// broker drops it.
	DeadLetterExchange string `json:"dead_letter_exchange,omitempty"`
	// Unknown says why the limit could not be found out; "" when it was.
	Unknown string `json:"unknown,omitempty"`
}

// SetAside reports whether the queue holds what was set aside (a .dlq, a
// .parked, an archive), the queues an operator's read is for.
func (c readCost) SetAside() bool {
	return c.Kind == kindDLQ || c.Kind == kindParked || c.Kind == kindArchive
}

// Known reports whether the delivery limit was found out.
func (c readCost) Known() bool { return c.Unknown == "" }

// SpendsBudget reports whether a read counts a delivery of each message
// read against a limit, as far as is known.
func (c readCost) SpendsBudget() bool { return c.Limit > 0 }

// Free reports whether a read costs nothing but the redelivered mark: a
// set-aside queue known to have no delivery limit.
func (c readCost) Free() bool { return c.SetAside() && c.Known() && !c.SpendsBudget() }

// String says the cost as an operator reads it, in one sentence.
func (c readCost) String() string {
	var b strings.Builder
	name := escape.String(c.Queue)
	fmt.Fprintf(&b, "%s is %s %s", name, article(c.Kind), c.Kind)
	if c.Type != "" {
		fmt.Fprintf(&b, " (%s)", c.Type)
	}
	switch c.Kind {
	case kindWork:
		b.WriteString(", whose messages are its consumers' work: a read holds them from the consumers while it lasts")
	case kindRung, kindDelayLevel, kindUndeliverable:
		b.WriteString(", whose messages are waiting to be delivered: a read holds them while it lasts")
	}
	switch {
	case !c.Known():
		fmt.Fprintf(&b, "; whether a read counts against a delivery limit is not known (%s)", c.Unknown)
	case c.SpendsBudget():
		fmt.Fprintf(&b, "; it has a delivery limit of %d (%s): a read counts one delivery of every message it reads against it, "+
			"and a message past the limit is ", c.Limit, c.LimitFrom)
		if c.DeadLetterExchange != "" {
			fmt.Fprintf(&b, "dead-lettered to exchange %s", escape.String(c.DeadLetterExchange))
		} else {
			b.WriteString("dropped by the broker (the queue has no dead-letter exchange)")
		}
	default:
		b.WriteString("; no delivery limit")
		if c.LimitFrom != "" {
			fmt.Fprintf(&b, " (%s)", c.LimitFrom)
		}
		b.WriteString(": a read marks each message redelivered and costs nothing more")
	}
	return b.String()
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an"
	}
	return "a"
}

// readKind is the kind of queue a name says: Q.dlq, Q.parked and NAME.archive
// are set aside; Q.retry.<delay> is a rung, acemq.delay.v1.* a delay level;
// any other name is a work queue.
func readKind(queue string) string {
	if strings.HasSuffix(queue, archiveSuffix) && len(queue) > len(archiveSuffix) {
		return kindArchive
	}
	switch _, role, _ := classify(queue); role {
	case roleDLQ:
		return kindDLQ
	case roleParked:
		return kindParked
	case roleRung:
		return kindRung
	case roleDelayLevel:
		return kindDelayLevel
	case roleUndeliverable:
		return kindUndeliverable
	}
	return kindWork
}

// readCost says what reading queue costs. The kind comes from the name; the
// queue's type, delivery limit and dead-letter exchange from the management
// API (its arguments and its effective policy; on RabbitMQ 4 a quorum queue
// that sets no limit has one of 20). t is asked first whether the queue is
// there (an error wrapping transport.ErrNotFound when it is not) and for the
// broker's version. When the management API cannot say, the readCost
// returned with the error still has its kind, and Unknown says why: a
// caller that goes on must say the limit is not known.
func (a *app) readCost(ctx context.Context, t transport.Transport, mc *mgmtClient, queue string) (readCost, error) {
	c := readCost{Queue: queue, Kind: readKind(queue)}
	if _, err := t.Inspect(ctx, queue); err != nil {
		c.Unknown = a.redact(escape.String(err.Error()))
		return c, fmt.Errorf("acemq: what reading %s costs: %w", escape.String(queue), err)
	}
	unknown := func(err error) (readCost, error) {
		c.Unknown = a.redact(escape.String(err.Error()))
		return c, fmt.Errorf("acemq: what reading %s costs: %w", escape.String(queue), err)
	}
	if mc == nil {
		return unknown(errors.New("no management API to ask"))
	}
	uri, err := amqp.ParseURI(a.url)
	if err != nil {
		return unknown(errors.New("the broker URL does not parse"))
	}
	q, err := mgmtSampled(ctx, mc, uri.Vhost, queue)
	if err != nil {
		return unknown(err)
	}
	major := 0
	if q.Type == "quorum" {
		if major, err = a.brokerMajor(ctx, t, mc); err != nil {
			return unknown(err)
		}
	}
	c.Type, c.Limit, c.LimitFrom, c.DeadLetterExchange = q.cost(major)
	return c, nil
}

// brokerMajor is RabbitMQ's major version: the transport's (the server
// properties of its connection), else the management API's overview.
func (a *app) brokerMajor(ctx context.Context, t transport.Transport, mc *mgmtClient) (int, error) {
	version := ""
	if v, ok := t.(transport.Versioned); ok {
		if product, ver, err := v.BrokerVersion(ctx); err == nil && product == "RabbitMQ" {
			version = ver
		}
	}
	if version == "" {
		var o struct {
			Version string `json:"rabbitmq_version"`
		}
		if err := mc.get(ctx, "/api/overview", nil, &o); err != nil {
			return 0, err
		}
		version = o.Version
	}
	var major int
	if _, err := fmt.Sscanf(version, "%d", &major); err != nil {
		return 0, fmt.Errorf("the broker's version %q is not RabbitMQ's", escape.String(version))
	}
	return major, nil
}

// sampleWait bounds how long readCost waits for the management API to
// sample a queue it has not yet (its policies are known only then).
const sampleWait = 15 * time.Second

// mgmtSampled is the queue's detail once the management API has sampled
// it: until then (up to collect_statistics_interval, 5 s by default, after
// it was declared) the answer has its arguments but says nothing of the
// policies that apply, and a policy's delivery limit would be missed.
func mgmtSampled(ctx context.Context, mc *mgmtClient, vhost, queue string) (mgmtQueueDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, sampleWait)
	defer cancel()
	path := "/api/queues/" + url.PathEscape(vhost) + "/" + url.PathEscape(queue)
	for asked := false; ; asked = true {
		var q mgmtQueueDetail
		err := mc.get(ctx, path, nil, &q)
		switch {
		case err == nil && q.Effective != nil:
			return q, nil
		case err != nil && (!asked || ctx.Err() == nil):
			return q, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
		if ctx.Err() != nil {
			return q, fmt.Errorf("the management API at %s has not sampled %s yet (it does every few seconds): its policies are not known", mc, escape.String(queue))
		}
	}
}

// mgmtQueueDetail is what GET /api/queues/{vhost}/{name} says of a queue's
// declaration and policies.
type mgmtQueueDetail struct {
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
	Policy    *string        `json:"policy"`
	Operator  *string        `json:"operator_policy"`
	// Effective is the policy and the operator policy as they apply; older
	// brokers write an empty one as [] rather than {}; it is absent (nil)
	// until the management API has sampled the queue.
	Effective json.RawMessage `json:"effective_policy_definition"`
}

// cost is the queue's type, the delivery limit a read counts against (the
// lower of its argument and its effective policy's, as RabbitMQ applies
// them; RabbitMQ 4's default when neither sets one, and none for -1, which
// 4 reads as unlimited), where that limit comes from, and its dead-letter
// exchange (the argument's, else the policy's).
func (q mgmtQueueDetail) cost(major int) (typ string, limit int, from, dlx string) {
	typ = q.Type
	if typ == "" {
		typ = "classic"
	}
	policy := map[string]any{}
	_ = json.Unmarshal(q.Effective, &policy) // [] or null: none
	dlx, _ = wire.String(q.Arguments["x-dead-letter-exchange"])
	if dlx == "" {
		dlx, _ = wire.String(policy["dead-letter-exchange"])
	}
	if typ != "quorum" {
		return typ, 0, "", dlx // only quorum queues count deliveries
	}
	var froms []string
	set := false
	for _, v := range []struct {
		value any
		from  string
	}{
		{q.Arguments["x-delivery-limit"], "its x-delivery-limit argument"},
		{policy["delivery-limit"], "policy " + policyNames(q.Policy, q.Operator)},
	} {
		n, ok := wire.Int(v.value)
		if !ok {
			continue
		}
		set = true
		if n < 0 {
			if limit == 0 {
				froms = append(froms, v.from+" says unlimited")
			}
			continue
		}
		switch {
		case limit == 0 || int(n) < limit:
			limit, froms = int(n), []string{v.from}
		case int(n) == limit:
			froms = append(froms, v.from)
		}
	}
	if !set && major >= 4 {
		return typ, defaultQuorumDeliveryLimit, fmt.Sprintf("RabbitMQ %d's default for a quorum queue that sets none", major), dlx
	}
	if limit > 0 {
		froms = slices.DeleteFunc(froms, func(s string) bool { return strings.HasSuffix(s, " says unlimited") })
	}
	return typ, limit, strings.Join(froms, " and "), dlx
}

// policyNames names the policy and the operator policy applied.
func policyNames(policy, operator *string) string {
	var names []string
	for _, p := range []*string{policy, operator} {
		if p != nil && *p != "" {
			names = append(names, escape.String(*p))
		}
	}
	if len(names) == 0 {
		return "(unnamed)"
	}
	return strings.Join(names, " and operator policy ")
}

// managementFor is the management API client for a command: at flagValue
// (its --management, when it has one), else $ACEMQ_MANAGEMENT_URL, else the
// broker's host (a.url, set by connect), with the TLS flags of fs. A
// password in the management URL joins what is redacted.
func (a *app) managementFor(fs *flag.FlagSet, flagValue string) (*mgmtClient, error) {
	raw := flagValue
	if raw == "" {
		raw = a.getenv(EnvManagement)
	}
	extra := a.secrets
	if raw != "" {
		extra.args = append(slices.Clone(extra.args), raw) // from the environment, it is not among the arguments
	}
	a.secrets = extra.withHTTPURLs()
	tlsConfig, err := a.tlsConfig(fs)
	if err != nil {
		return nil, err
	}
	return newMgmtClient(raw, a.url, tlsConfig)
}
