// Package middleware holds the middleware a service wraps its handlers in,
// one file each. Middleware without settings is a bare value; middleware
// with settings is a constructor. Chain them with acemq.Chain; the first
// listed is the outermost:
//
//	mux.Use(middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover(log))
//
// # Order
//
// Put Decode first: a body that cannot be read is parked before anything
// else spends time on it. Put Recover innermost, next to the handler, so a
// panic becomes a retry that the middleware around it (idempotency release,
// tracing) sees as an ordinary failure.
package middleware
