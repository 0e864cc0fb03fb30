package middleware

import (
	"context"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
)

// Decode parks a message whose body c refuses, before any handler runs,
// with the reason "could not be decoded: ..." (ack.Undecodable). A decode failure never
// reaches the retry path: it would not improve with time, and retrying it
// would only spend attempts on the way to the same place.
func Decode(c codec.Codec) acemq.Middleware {
	check := func(body []byte) error {
		var v any
		return c.Unmarshal(body, &v)
	}
	if v, ok := c.(codec.Validator); ok {
		check = v.Validate
	}
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			if err := check(m.Body()); err != nil {
				return ack.Undecodable(err)
			}
			return next.ServeMessage(ctx, m)
		})
	}
}
