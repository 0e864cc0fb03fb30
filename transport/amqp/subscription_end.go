package rabbitmq

import (
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// How a subscription's deliveries end when nobody asked: why (ended, the
// broker's words read by ending.go), what it logs, and what it records.

// cancelGrace is how long a broker's cancel waits for the connection
// close that follows it when its vhost was deleted.
const cancelGrace = time.Second

// asked reports whether Cancel or Close was called.
func (s *subscription) asked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// ended says why c's deliveries closed, unasked, and logs a lost channel
// with the broker's code and text: a basic.cancel leaves the channel open;
// anything else closed it. A channel the broker closed for its
// consumer_timeout is reported to OnConsumerTimeout, with the timeout the
// broker stated, before the subscription consumes again.
func (s *subscription) ended(c *consumeCh) ending {
	var reason *amqp.Error
	select {
	case tag, ok := <-c.cancels:
		if !ok || tag != s.tag {
			break
		}
		// A deleted vhost cancels every consumer first and closes the
		// connection some 20 ms later (320 CONNECTION_FORCED). Wait a
		// moment for that close, so that the ending names the vhost (the
		// reconnect is refused: 530), not a deleted queue.
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case reason = <-c.closes:
		case <-t.C:
		}
		if reason == nil {
			return decideCancel(s.queue) // end logs it
		}
	default:
	}
	// amqp091-go sends the close reason before it closes the deliveries,
	// so it is here already, unless the channel went without one.
	if reason == nil {
		select {
		case reason = <-c.closes:
		default:
		}
	}
	var end ending
	if reason != nil {
		end = decideClose(s.queue, reason)
	} else {
		end = decideClose(s.queue, errors.New("closed without a reason"))
	}
	fields := closeFields(reason)
	if end.final {
		s.log.Warn("acemq: consumer channel lost", fields...)
		return end // end logs why the subscription ends
	}
	if end.unreadable {
		if n := s.t.countUnreadable(s.queue); n == 1 {
			s.log.Error("acemq: "+UnreadableAdvice(s.queue+s.unreadableWhere()), fields...)
		} else {
			s.log.Error("acemq: the delivery this client cannot read is still at the head of queue "+s.queue+s.unreadableWhere(),
				append(fields, zap.Int("connections_lost", n))...)
		}
	}
	s.log.Warn("acemq: consumer channel lost; resubscribing, its unsettled deliveries are stale", fields...)
	if s.timedOut != nil && errors.Is(end.err, transport.ErrConsumerTimeout) {
		s.dropBuffered()                         // stale: no worker should begin on one once told
		s.timedOut(statedTimeout(reason.Reason)) // before resubscribing: nothing of the old channel comes back first
	}
	return end
}

// unreadableWhere qualifies the queue named in the unreadable-delivery
// log line: on a shared connection any queue consumed on it may hold it.
func (s *subscription) unreadableWhere() string {
	if s.own {
		return ""
	}
	return " or of another queue consumed on the same connection (WithConnectionPerConsumer(false))"
}

// closeFields are the log fields of a channel or connection close: the
// broker's (or amqp091-go's) code and text, and who said it.
func closeFields(reason *amqp.Error) []zap.Field {
	if reason == nil {
		return []zap.Field{zap.String("reason", "closed without a reason (the connection went)")}
	}
	return []zap.Field{zap.Int("code", reason.Code), zap.String("reason", reason.Reason), zap.Bool("server", reason.Server)}
}

// end records why the subscription ended unasked, unless Cancel or Close
// came first, and lets go of the connection of its own when the channel
// is dead (nothing of it can be settled any more).
func (s *subscription) end(e ending) {
	s.mu.Lock()
	if !s.cancelled {
		s.err = e.err
	}
	ch := s.ch
	s.mu.Unlock()
	s.log.Warn("acemq: the subscription ends", zap.Error(e.err))
	if ch.IsClosed() && s.own {
		_ = s.conn.Close() // stops redialling a broker that refused it
	}
}
