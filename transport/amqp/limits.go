package rabbitmq

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/transport"
)

// measure checks a publish, its headers converted, against every AMQP
// limit but the frame size, and returns the size of its content header
// for [fit]. A publish that breaks one is refused here, as a
// *transport.LimitError, before a frame is written: amqp091-go would fail
// it after writing basic.publish, and the connection would die with every
// publish in flight on it. A mandatory publish is measured with seqHeader
// whether or not it will carry it (a return is matched by id when it can
// be, and by seqHeader only when not): what is refused does not depend on
// what else is in flight, and is what the memory transport refuses
// (amqplimit.AddSeq).
func measure(pub *transport.Publishing, headers amqp.Table) (int, error) {
	size, err := amqplimit.Measure(&pub.Properties, headers, decimalSize)
	if err == nil && pub.Mandatory {
		size, err = amqplimit.AddSeq(size, headers)
	}
	if err != nil {
		return 0, fmt.Errorf("acemq: publish to %s: %w", destination(pub), err)
	}
	return size, nil
}

// fit checks a measured content header against c's negotiated frame size.
func fit(pub *transport.Publishing, size int, c *confirmCh) error {
	if err := amqplimit.Fit(size, c.frameMax); err != nil {
		return fmt.Errorf("acemq: publish to %s: %w", destination(pub), err)
	}
	return nil
}

// decimalSize sizes the one field type toTable passes that
// internal/amqplimit does not know.
func decimalSize(v any) (int, bool) {
	_, ok := v.(amqp.Decimal)
	return 1 + 1 + 4, ok // type, scale, value
}
