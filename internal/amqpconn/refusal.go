package amqpconn

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Refusal is what the broker's answer to a connection attempt means for
// the client: whether dialling again can cure it. Classify decides it from
// the broker's own words, in one place, for Conn's reconnects and for
// transport/amqp's endings alike.
type Refusal uint8

const (
	// NotRefused: the broker said nothing that refuses the connection (a
	// lost socket, a timeout, a frame error). Dialling again is the cure.
	NotRefused Refusal = iota
	// Transient: the broker refused the connection for now, and will take
	// it once something outside the client changes: a connection limit
	// with room again, a vhost back up, a node done booting or out of
	// maintenance. Dialling again with backoff is the cure; nothing ends.
	Transient
	// Permanent: the broker refused the connection until an operator acts:
	// the vhost deleted, the user's access to it withdrawn, the
	// credentials refused. Dialling again cannot cure it.
	Permanent
)

func (r Refusal) String() string {
	switch r {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return "not refused"
}

// The causes Classify names, the reason attribute of the refusal metric
// and the words of the logs. Their set is closed: a metric attribute must
// not take the broker's free text.
const (
	CauseVhostConnectionLimit = "connection_limit"      // 530: the vhost's max-connections
	CauseUserConnectionLimit  = "user_connection_limit" // 530: the user's max-connections
	CauseNodeConnectionLimit  = "node_connection_limit" // 530: the node's connection_max
	CauseVhostDown            = "vhost_down"            // 541: the vhost is not running on the node (starting, restarting)
	CauseNodeNotAccepting     = "node_not_accepting"    // TCP refused: the node is booting, stopped, or in maintenance
	CauseVhostNotFound        = "vhost_not_found"       // 530: the vhost was deleted
	CauseAccessRefused        = "access_refused"        // 530 or 403: permissions or credentials
)

// AMQP reply codes with which the broker refuses a connection.open.
const (
	codeAccessRefused = 403 // the credentials (amqp091-go's ErrCredentials), a loopback-only user
	codeNotAllowed    = 530 // a connection limit, the vhost gone, or the user's access to it withdrawn
	codeInternalError = 541 // the vhost is down on this node
)

// Verdict is Classify's answer: what the refusal is, its cause (one of the
// Cause constants, empty for NotRefused) and the broker's reply, when it
// gave one.
type Verdict struct {
	Refusal Refusal
	Cause   string
	Reply   *amqp.Error // nil for a refusal the broker made without words (TCP)
}

// Classify says what err, from a connection attempt or the close of a
// connection or channel, makes of the broker's refusal, by the broker's
// words as RabbitMQ 3.10 to 4.x write them (rabbit_reader, checked
// against 3.10.8):
//
//   - 530 "access to vhost 'v' refused for user 'u': connection limit (N)
//     is reached" (the vhost's max-connections; also "connection limit
//     cannot be queried, timeout"), 530 "connection refused for user 'u':
//     user connection limit (N) is reached" (the user's max-connections;
//     3.10 writes "Connection" with a capital), 530 "connection refused:
//     node connection limit (N) is reached" (connection_max): transient.
//   - 541 "access to vhost 'v' refused for user 'u': vhost 'v' is down" (a
//     vhost not running on the node: starting, or restarting after a
//     crash): transient.
//   - A TCP connection refused (the node is booting, stopped, or its
//     listeners are suspended for maintenance): transient.
//   - 530 "vhost v not found": permanent, the vhost was deleted.
//   - 530 "access to vhost 'v' refused for user 'u'" (no permission) and
//     403 (credentials refused, a loopback-only user): permanent.
//
// A connection.blocked (a resource alarm) refuses publishes, never a
// connection: Conn reports it through Blocked. Everything else is
// NotRefused.
func Classify(err error) Verdict {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return Verdict{Refusal: Transient, Cause: CauseNodeNotAccepting}
		}
		return Verdict{}
	}
	words := strings.ToLower(ae.Reason)
	switch ae.Code {
	case codeNotAllowed:
		switch {
		case strings.Contains(words, "user connection limit"):
			return Verdict{Transient, CauseUserConnectionLimit, ae}
		case strings.Contains(words, "node connection limit"):
			return Verdict{Transient, CauseNodeConnectionLimit, ae}
		case strings.Contains(words, "connection limit"):
			return Verdict{Transient, CauseVhostConnectionLimit, ae}
		case strings.Contains(words, "not found"):
			return Verdict{Permanent, CauseVhostNotFound, ae}
		}
		return Verdict{Permanent, CauseAccessRefused, ae}
	case codeInternalError:
		if strings.Contains(words, "is down") {
			return Verdict{Transient, CauseVhostDown, ae}
		}
	case codeAccessRefused:
		return Verdict{Permanent, CauseAccessRefused, ae}
	}
	return Verdict{}
}

// RefusedError describes a streak of reconnect attempts the broker refused
// for now (Classify's Transient): the latest refusal, how many attempts in
// a row it refused, and since when. Conn goes on dialling with backoff.
type RefusedError struct {
	Cause string      // one of the Cause constants
	Reply *amqp.Error // the broker's words; nil for a TCP refusal
	Err   error       // the attempt's error, its URL redacted
	Tries int         // attempts refused in a row
	Since time.Time   // the first of them
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the broker refuses the connection for now (%s): %s; %d attempt(s) refused since %s, trying again with backoff",
		e.Cause, e.Reason(), e.Tries, e.Since.UTC().Format(time.RFC3339))
}

// Reason is the broker's words: its reply code and text, or the dial's
// error for a TCP refusal.
func (e *RefusedError) Reason() string {
	if e.Reply != nil {
		return fmt.Sprintf("%s (%d)", e.Reply.Reason, e.Reply.Code)
	}
	return e.Err.Error()
}

func (e *RefusedError) Unwrap() error { return e.Err }
