package middleware

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// MaxAge dead-letters a message older than max before its handler runs,
// with the reason "exceeded the maximum message age of ...". Age is the
// message's, from its first publish, not this attempt's: a queue paused
// overnight hands back messages on attempt one and a day old. Zero means no
// limit.
func MaxAge(max time.Duration) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler {
		if max <= 0 {
			return next
		}
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			if age := m.Age(); age >= max {
				return ack.TooOld(max, fmt.Errorf("acemq: the message is %s old", age.Round(time.Millisecond)))
			}
			return next.ServeMessage(ctx, m)
		})
	}
}
