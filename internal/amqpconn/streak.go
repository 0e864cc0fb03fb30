package amqpconn

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// A streak is the run of reconnect attempts the broker refuses for now
// (refusal.go classifies them): what Conn reports of it, to whom, and how
// it logs it, apart from the connection's supervision in conn.go.

// Refused returns the streak of reconnect attempts the broker is refusing
// for now (a connection limit reached, a vhost down, a node not
// accepting), or nil when the latest attempt was not so refused. It is a
// copy: the streak goes on without it.
func (c *Conn) Refused() *RefusedError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streak == nil {
		return nil
	}
	r := *c.streak
	return &r
}

// NotifyRefused calls fn with the streak each time the broker refuses a
// reconnect attempt for now (Classify's Transient), and with nil once,
// when a reconnect succeeds after such refusals (or Close ends them). A
// streak under way when fn is registered is reported to it at once, on the
// caller's goroutine; every later report comes from Conn's own, with no
// lock held: fn must return promptly and must not call Conn. The returned
// func unregisters fn.
//
// While anyone listens, Conn logs the streak at debug level only: the
// listener is to say it, in its own terms (the server names the queue).
func (c *Conn) NotifyRefused(fn func(*RefusedError)) (stop func()) {
	c.mu.Lock()
	if c.listeners == nil {
		c.listeners = make(map[int]func(*RefusedError))
	}
	id := c.nextID
	c.nextID++
	c.listeners[id] = fn
	var now *RefusedError
	if c.streak != nil {
		r := *c.streak
		now = &r
	}
	c.mu.Unlock()
	if now != nil {
		fn(now)
	}
	return func() {
		c.mu.Lock()
		delete(c.listeners, id)
		c.mu.Unlock()
	}
}

// noteRefusal records a reconnect attempt to u that the broker refused,
// as Classify judges it, and reports whether it was a refusal for now
// (then it is logged here, at a bounded rate, and its listeners told). A
// refusal for good is kept for ChannelUnlessRefused; one for now clears
// it (the broker no longer says the vhost is gone); any other failure (no
// answer, a lost socket) leaves both as they were.
func (c *Conn) noteRefusal(err error, u string) bool {
	v := Classify(err)
	switch v.Refusal {
	case Permanent:
		c.mu.Lock()
		if c.refusal == nil {
			close(c.refused)
		}
		c.refusal = v.Reply
		c.mu.Unlock()
		return false
	case Transient:
	default:
		return false
	}
	now := time.Now()
	c.mu.Lock()
	if c.refusal != nil {
		c.refusal, c.refused = nil, make(chan struct{})
	}
	first := c.streak == nil
	if first {
		c.streak = &RefusedError{Since: now}
	}
	var reply *amqp.Error
	if v.Reply != nil { // the broker's words can quote the user, and so a password equal to it
		shown := *v.Reply
		shown.Reason = RedactText(shown.Reason, c.cfg.URLs...)
		reply = &shown
	}
	c.streak.Cause, c.streak.Reply, c.streak.Err = v.Cause, reply, redactErr(err, u)
	c.streak.Tries++
	r := *c.streak
	logIt := first || now.Sub(c.loggedAt) >= refusalLogEvery
	if logIt {
		c.loggedAt = now
	}
	fns := c.listenersLocked()
	c.mu.Unlock()
	if logIt {
		fields := []zap.Field{zap.String("url", Redact(u)), zap.String("cause", r.Cause),
			zap.String("reason", RedactText(r.Reason(), u)), zap.Int("tries", r.Tries), zap.Stringer("refused_for", now.Sub(r.Since).Round(time.Millisecond))}
		msg := "acemq: the broker refuses the connection for now; dialling again with backoff"
		if !first {
			msg = "acemq: the broker still refuses the connection; dialling again with backoff"
		}
		if len(fns) > 0 {
			c.log.Debug(msg, fields...)
		} else {
			c.log.Warn(msg, fields...)
		}
	}
	for _, fn := range fns {
		fn(&r)
	}
	return true
}

// endStreak ends a streak of refusals for now, if one is under way: a
// reconnect succeeded (connected) or Close came first. Listeners are told
// with nil.
func (c *Conn) endStreak(connected bool) {
	c.mu.Lock()
	r := c.streak
	c.streak, c.loggedAt = nil, time.Time{}
	fns := c.listenersLocked()
	c.mu.Unlock()
	if r == nil {
		return
	}
	if connected {
		fields := []zap.Field{zap.String("cause", r.Cause), zap.Int("tries", r.Tries),
			zap.Stringer("refused_for", time.Since(r.Since).Round(time.Millisecond))}
		if len(fns) > 0 {
			c.log.Debug("acemq: the broker accepts the connection again", fields...)
		} else {
			c.log.Info("acemq: the broker accepts the connection again", fields...)
		}
	}
	for _, fn := range fns {
		fn(nil)
	}
}

func (c *Conn) listenersLocked() []func(*RefusedError) {
	fns := make([]func(*RefusedError), 0, len(c.listeners))
	for _, fn := range c.listeners {
		fns = append(fns, fn)
	}
	return fns
}
