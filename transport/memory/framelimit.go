package memory

import (
	"fmt"

	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/transport"
)

// FrameMax is the frame_max every connection to a Broker negotiates,
// RabbitMQ's default. A publish whose content header (properties and
// headers) does not fit it, with room for the headers dead-lettering adds,
// is refused as the amqp transport refuses it.
const FrameMax = amqplimit.DefaultFrameMax

// checkLimits refuses what the amqp transport refuses before writing a
// frame, with the same *transport.LimitError: a short-string property over
// 255 bytes, a header name over 255, headers nested deeper or wider than
// amqp091-go reads, or a content header too large for FrameMax. A
// mandatory publish counts the header the amqp transport adds to it.
func checkLimits(p *transport.Publishing) error {
	size, err := amqplimit.Measure(&p.Properties, p.Headers, nil)
	if err == nil && p.Mandatory {
		size, err = amqplimit.AddSeq(size, p.Headers)
	}
	if err == nil {
		err = amqplimit.Fit(size, FrameMax)
	}
	if err != nil {
		return fmt.Errorf("memory: publish to %s: %w", destination(p), err)
	}
	return nil
}
