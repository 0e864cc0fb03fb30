package rabbitmq

import (
	"strconv"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
)

// refused is the transport's error for a refusal for now (amqpconn's
// Transient verdict v on err): a *transport.RefusedError, which matches
// transport.ErrRefused. streak is amqpconn's record of the attempts
// refused in a row, nil for a single attempt (a Consume whose first dial
// was refused).
func refused(v amqpconn.Verdict, err error, streak *amqpconn.RefusedError) *transport.RefusedError {
	r := &transport.RefusedError{Cause: v.Cause, Tries: 1, Since: time.Now()}
	if streak != nil {
		r.Tries, r.Since = streak.Tries, streak.Since
	}
	switch {
	case streak != nil:
		r.Reason = streak.Reason()
	case v.Reply != nil:
		r.Reason = v.Reply.Reason + " (" + strconv.Itoa(v.Reply.Code) + ")"
	default:
		r.Reason = err.Error()
	}
	return r
}

// watchRefusals tells fn (ConsumeOptions.OnRefused) of every reconnect of
// the subscription's connection that the broker refuses for now, and with
// nil once it is connected again. On a shared connection
// (WithConnectionPerConsumer(false)) every subscription on it is told.
// The subscription's Close stops it.
func (s *subscription) watchRefusals(fn func(error)) {
	if fn == nil {
		return
	}
	s.unwatch = s.conn.NotifyRefused(func(r *amqpconn.RefusedError) {
		if r == nil {
			fn(nil)
			return
		}
		fn(refused(amqpconn.Verdict{Refusal: amqpconn.Transient, Cause: r.Cause, Reply: r.Reply}, r.Err, r))
	})
}

// stopWatching ends watchRefusals; it is idempotent.
func (s *subscription) stopWatching() {
	s.mu.Lock()
	stop := s.unwatch
	s.unwatch = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}
