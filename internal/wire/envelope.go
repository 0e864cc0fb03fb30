package wire

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acemq/acemq/transport"
)

// Envelope is acemq.Envelope field for field, with the same names, types
// and order, so that the root package converts one into the other
// (acemq.Envelope(wire.Read(d))) and this package need not import it. The
// fields are documented there.
type Envelope struct {
	ID            string
	Attempt       int
	Error         string
	CreatedAt     time.Time
	Redelivered   bool
	DeliveryCount int
	Snoozes       int
	Queue         string
	Exchange      string
	RoutingKey    string
	ContentType   string
	CorrelationID string
}

// Read reads a delivery's envelope: the contract's headers, falling back on
// the AMQP properties (message id, timestamp) and the broker's own fields.
// It makes nothing up, so that what an operator peeks at is what the queue
// holds: ID is empty when the message has neither x-acemq-id nor a message
// id, and CreatedAt zero when it has neither x-acemq-created nor a
// timestamp. A consumer that needs both fills them in itself.
//
// Error is x-acemq-error; a message without one that the broker
// dead-lettered (its delivery limit, its TTL, a rejection, a full queue)
// gets the broker's reason from x-death instead ([BrokerReason]), so that
// what sits in a .dlq never reads as if nothing were wrong with it.
func Read(d transport.Delivery) Envelope {
	h := d.Headers
	env := Envelope{
		Attempt:       1,
		Redelivered:   d.Redelivered,
		Queue:         d.Queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		CorrelationID: d.CorrelationID,
	}
	if s, ok := String(h[ID]); ok && s != "" {
		env.ID = s
	} else {
		env.ID = d.MessageID
	}
	if n, ok := Int(h[Attempt]); ok && n > 1 && n < 1<<31 {
		env.Attempt = int(n)
	}
	if s, ok := String(h[Error]); ok {
		env.Error = s
	} else {
		env.Error = BrokerReason(h)
	}
	if t, ok := Time(h[Created]); ok {
		env.CreatedAt = t
	} else {
		env.CreatedAt = d.Timestamp
	}
	if n, ok := Int(h[deliveryCount]); ok && n > 0 && n < 1<<31 {
		env.DeliveryCount = int(n)
	}
	if n, ok := Int(h[Snoozes]); ok && n > 0 && n < 1<<31 {
		env.Snoozes = int(n)
	}
	if s, ok := String(h[Exchange]); ok {
		env.Exchange = s
		if k, ok := String(h[RoutingKey]); ok {
			env.RoutingKey = k
		}
	}
	return env
}

// BrokerReason is why the broker dead-lettered a message, read from the
// newest entry of its x-death header (the first: RabbitMQ puts the entry of
// the latest death in front), as "the broker dead-lettered it from queue
// orders: it reached the queue's delivery limit: ... (delivery_limit)".
// It is empty when x-death is absent or unreadable (it also comes from
// other clients, in any shape), and when the newest death is one of the
// library's own waits, an expiry from a rung (Q.retry.<D>) or a delay
// level (acemq.delay.v1.NN): that message is on its way back to work, not
// given up on.
func BrokerReason(h map[string]any) string {
	deaths, ok := h[xDeath].([]any)
	if !ok || len(deaths) == 0 {
		return ""
	}
	d, ok := deaths[0].(map[string]any)
	if !ok {
		return ""
	}
	queue, okQ := String(d["queue"])
	reason, okR := String(d["reason"])
	if !okQ || !okR || queue == "" || reason == "" || reason == "expired" && isWait(queue) {
		return ""
	}
	var b strings.Builder
	b.WriteString("the broker dead-lettered it from queue ")
	b.WriteString(shown(queue, maxShownQueue))
	switch what := brokerReasons[reason]; {
	case what != "":
		b.WriteString(": ")
		b.WriteString(what)
		b.WriteString(" (")
		b.WriteString(reason)
	default:
		b.WriteString(" (")
		b.WriteString(shown(reason, maxShownReason))
	}
	if n, ok := Int(d["count"]); ok && n > 1 {
		b.WriteString(", ")
		b.WriteString(strconv.FormatInt(n, 10))
		b.WriteString(" times")
	}
	b.WriteString(")")
	return b.String()
}

// xDeath is RabbitMQ's record of a message's dead-letterings, one entry
// per queue and reason.
const xDeath = "x-death"

// brokerReasons say in words what each of RabbitMQ's dead-lettering
// reasons means for the message, for an operator reading a .dlq.
var brokerReasons = map[string]string{
	"delivery_limit": "it reached the queue's delivery limit: it went back to the queue unacknowledged " +
		"(a consumer crashed, was cut off, timed out or gave it back) more times than x-delivery-limit allows",
	"expired":  "it expired, having waited there longer than its time to live",
	"rejected": "a consumer rejected it without requeueing it",
	"maxlen":   "the queue was over its length limit (x-max-length or x-max-length-bytes)",
}

// Bounds on what a reason repeats of x-death: a queue name is an AMQP
// short string, and neither may make a reason the size of the header.
const (
	maxShownQueue  = 255
	maxShownReason = 64
)

// shown is s as a reason shows it: as it is when it is short, valid UTF-8
// and printable, else quoted (escaped) and cut to about limit bytes.
func shown(s string, limit int) string {
	plain := len(s) <= limit && utf8.ValidString(s) &&
		strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
	if plain {
		return s
	}
	cut := false
	if len(s) > limit {
		s, cut = s[:limit], true
	}
	q := strconv.Quote(s)
	if cut {
		q += "..."
	}
	return q
}

// isWait reports whether queue is one of the library's waits, whose
// expiries bring a message back rather than give it up: a rung,
// <queue>.retry.<D> with D written as retry.FormatDelay writes it (40s,
// 1h30m, 250ms), or a level of the delay queues (acemq.delay.v1.NN).
func isWait(queue string) bool {
	if strings.HasPrefix(queue, "acemq.delay.") {
		return true
	}
	i := strings.LastIndex(queue, ".retry.")
	return i > 0 && isDelay(queue[i+len(".retry."):])
}

// isDelay reports whether s is a delay as rung names write it: one or
// more of <n>h, <n>m, <n>s, <n>ms, in that order.
func isDelay(s string) bool {
	units := []string{"h", "ms", "m", "s"} // ms before m: the longer unit first
	rank := map[string]int{"h": 0, "m": 1, "s": 2, "ms": 3}
	last := -1
	for s != "" {
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 {
			return false
		}
		s = s[n:]
		unit := ""
		for _, u := range units {
			if strings.HasPrefix(s, u) {
				unit = u
				break
			}
		}
		if unit == "" || rank[unit] <= last {
			return false
		}
		last = rank[unit]
		s = s[len(unit):]
	}
	return last >= 0
}
