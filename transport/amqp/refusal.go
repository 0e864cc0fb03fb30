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

// dialRefusal is what Consume returns when the broker refused the first
// dial of the subscription's own connection: for a refusal for now, a
// *transport.RefusedError (transport.ErrRefused) in the broker's words,
// with the transport's passwords hidden in them, for the caller to try
// again; err as it is otherwise (a vhost gone, access refused: the
// broker's reply still inside, for classify).
func (t *Transport) dialRefusal(err error) error {
	v := amqpconn.Classify(err)
	if v.Refusal != amqpconn.Transient {
		return err
	}
	r := refused(v, err, nil)
	r.Reason = amqpconn.RedactText(r.Reason, t.cfg.urls...)
	return r
}
