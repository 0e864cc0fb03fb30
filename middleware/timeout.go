package middleware

import (
	"context"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// Timeout gives the handler a context that ends after d, so a slow
// dependency call returns an error the handler can answer with ack.Retry
// rather than holding a consumer slot indefinitely. The handler's answer is
// kept as it is: work that finished after the deadline is still done.
func Timeout(d time.Duration) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next.ServeMessage(ctx, m)
		})
	}
}
