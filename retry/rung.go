package retry

import (
	"strconv"
	"strings"
	"time"
)

// Exchange is the direct exchange an expired rung message is dead-lettered
// through on its way home; each source queue is bound to it by its own name.
const Exchange = "acemq.retry"

// DeadLetterExchange is the direct exchange the family declares beside
// [Exchange] for dead letters.
const DeadLetterExchange = "acemq.dlx"

// RungName names the rung queue where messages of queue wait d:
// RungName("shipping.orders", 40*time.Second) is "shipping.orders.retry.40s".
// Two services consuming one queue must agree on it, byte for byte.
func RungName(queue string, d time.Duration) string {
	return queue + ".retry." + FormatDelay(d)
}

// RungArgs returns the rung queue's arguments: exactly these three keys, the
// same in every AceMQ library, because a rung declared with anything else is
// refused (PRECONDITION_FAILED) to the next service that declares it. The TTL
// is in whole milliseconds.
func RungArgs(queue string, d time.Duration) map[string]any {
	return map[string]any{
		"x-message-ttl":             d.Milliseconds(),
		"x-dead-letter-exchange":    Exchange,
		"x-dead-letter-routing-key": queue,
	}
}

// FormatDelay writes d compactly, the way rung names carry it: 40s, 5m,
// 1h30m, 1m30s, 250ms. Anything below a millisecond is dropped, as the TTL
// drops it.
func FormatDelay(d time.Duration) string {
	d = d.Truncate(time.Millisecond)
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / u.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}
