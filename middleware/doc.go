// Package middleware holds the middleware a service wraps its handlers in,
// one file each. Middleware without settings is a bare value; middleware
// with settings is a constructor, whose required argument comes first and
// whose optional settings are With* options: the logger and meter provider
// by the names the rest of acemq uses ([WithLogger], [WithMeterProvider]).
// Chain them with acemq.Chain; the first listed is the outermost:
//
//	mux.Use(middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover(middleware.WithLogger(log)))
//
// # Order
//
// Put Decode first: a body that cannot be read is parked before anything
// else spends time on it. Decode only checks the body; a handler written
// with acemq.Decoded parses it itself and parks what it cannot read, so use
// one or the other, not both, or the body is parsed twice. Middleware given
// to Decoded runs after the body is read, which is where Idempotent goes
// for such a handler: acemq.Decoded(codec.JSON, fn, middleware.Idempotent(store)).
// For middleware on some queues only, see acemq.Mux.With and Mux.Group.
//
// # Panics
//
// The server is the one safety net: it recovers a panic in any handler or
// middleware, logs it with its stack and treats it as a retry, so a panic
// never takes the process down, with or without Recover. Recover is for
// seeing a panic, not for surviving one: put it innermost, next to the
// handler, and the middleware around it (logging, say) sees an
// ordinary failure carrying a [*PanicError] with the stack. Idempotent
// does not recover: it releases its claim as a panic passes through it.
package middleware
