package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// frameMax is RabbitMQ's default negotiated frame size.
const frameMax = 131072

// FuzzCopyWritable holds the promise of a republished copy: it can be
// written, or it is over an AMQP limit (ErrTooLarge, and then the server
// parks a trimmed copy), and the trimmed copy can always be written. Any
// other refusal would leave the server giving the original back forever.
func FuzzCopyWritable(f *testing.F) {
	f.Add([]byte{0, 0, 1, 5}, "7", "reason", 0, 0)
	f.Add([]byte{16, 16}, strings.Repeat("i", 300), "exhausted 5 attempts: boom", 129000, 0)
	f.Add([]byte{17, 0}, "x", strings.Repeat("r", 9000), 0, 300)
	f.Add([]byte{17, 14, 17, 14, 17, 15}, "tenant", "", 131000, 10)
	f.Fuzz(func(t *testing.T, data []byte, s, reason string, blob, longID int) {
		h := table(data, s, 0)
		if blob > 0 {
			h["blob"] = strings.Repeat("b", blob%(2*frameMax))
		}
		id := s
		if longID > 0 {
			id = strings.Repeat("i", longID%20000)
		}
		d := transport.Delivery{Queue: "q", RoutingKey: "q", Headers: h, Body: data,
			Properties: transport.Properties{CorrelationID: s[:min(len(s), 255)]}}
		env := wire.Read(d)
		env.ID = id
		p := wire.Copy(d, env, "q.dlq", env.Attempt, reason)
		err := amqplimit.Check(&p.Properties, p.Headers, frameMax, nil)
		if err == nil {
			return
		}
		if !errors.Is(err, transport.ErrTooLarge) {
			t.Fatalf("a copy refused for something else than a limit (it would go round forever): %v", err)
		}
		trimmed := wire.Trim(p)
		if err := amqplimit.Check(&trimmed.Properties, trimmed.Headers, frameMax, nil); err != nil {
			t.Fatalf("the trimmed copy cannot be written either: %v", err)
		}
	})
}
