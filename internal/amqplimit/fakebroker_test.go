package amqplimit

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// fakeBroker is the broker's end of an amqp091-go connection over a pipe,
// with just enough AMQP to publish and get. It keeps the content header
// frame of the last publish as amqp091-go's writer wrote it, and hands it
// back byte for byte to the next basic.get, for amqp091-go's reader: so a
// test learns what the client writes and whether it can read it back,
// with no broker in between to refuse or change it.
type fakeBroker struct {
	conn     net.Conn
	w        *bufio.Writer
	frameMax uint32
	header   []byte        // the last publish's content header payload
	headers  chan []byte   // a copy of each, for the test
	done     chan struct{} // closed when serve has returned
}

// dialFake opens an amqp091-go connection and channel to a fake broker
// that negotiates frameMax. The test closes them when it ends.
func dialFake(tb testing.TB, frameMax int) (*amqp.Connection, *amqp.Channel, *fakeBroker) {
	tb.Helper()
	client, server := net.Pipe()
	b := &fakeBroker{
		conn: server, w: bufio.NewWriter(server), frameMax: uint32(frameMax),
		headers: make(chan []byte, 1), done: make(chan struct{}),
	}
	go b.serve()
	tb.Cleanup(func() {
		_ = server.Close()
		<-b.done
	})
	conn, err := amqp.Open(client, amqp.Config{
		SASL:      []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}},
		Vhost:     "/",
		FrameSize: frameMax,
		Locale:    "en_US",
	})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatalf("channel: %v", err)
	}
	return conn, ch, b
}

func (b *fakeBroker) serve() {
	defer close(b.done)
	defer b.conn.Close()
	r := bufio.NewReader(b.conn)
	var proto [8]byte
	if _, err := io.ReadFull(r, proto[:]); err != nil {
		return
	}
	// connection.start: version 0-9, no server properties, PLAIN, en_US.
	b.method(0, 10, 10, []byte{0, 9}, u32(0), longstr("PLAIN"), longstr("en_US"))
	for {
		typ, channel, payload, err := readFrame(r)
		if err != nil {
			return
		}
		switch typ {
		case 1: // method
			switch class, method := binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:]); {
			case class == 10 && method == 11: // start-ok: tune, no heartbeat
				b.method(0, 10, 30, u16(0), u32(b.frameMax), u16(0))
			case class == 10 && method == 40: // open
				b.method(0, 10, 41, []byte{0})
			case class == 10 && method == 50: // close
				b.method(0, 10, 51)
				return
			case class == 20 && method == 10: // channel.open
				b.method(channel, 20, 11, u32(0))
			case class == 20 && method == 40: // channel.close
				b.method(channel, 20, 41)
			case class == 60 && method == 70: // basic.get
				if b.header == nil {
					b.method(channel, 60, 72, []byte{0})
					continue
				}
				// get-ok: delivery tag, redelivered, exchange, routing key, message count
				b.method(channel, 60, 71, []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0}, []byte{0}, []byte{1, 'q'}, u32(0))
				b.frame(2, channel, b.header)
				b.header = nil
			}
		case 2: // content header
			b.header = payload
			select {
			case b.headers <- payload:
			default:
			}
		}
		if b.w.Flush() != nil {
			return
		}
	}
}

func (b *fakeBroker) method(channel uint16, class, method uint16, args ...[]byte) {
	p := append(u16(class), u16(method)...)
	for _, a := range args {
		p = append(p, a...)
	}
	b.frame(1, channel, p)
	_ = b.w.Flush()
}

func (b *fakeBroker) frame(typ byte, channel uint16, payload []byte) {
	_ = b.w.WriteByte(typ)
	_, _ = b.w.Write(u16(channel))
	_, _ = b.w.Write(u32(uint32(len(payload))))
	_, _ = b.w.Write(payload)
	_ = b.w.WriteByte(0xCE)
}

func readFrame(r io.Reader) (typ byte, channel uint16, payload []byte, err error) {
	var h [7]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return
	}
	payload = make([]byte, binary.BigEndian.Uint32(h[3:])+1) // and frame-end
	if _, err = io.ReadFull(r, payload); err != nil {
		return
	}
	return h[0], binary.BigEndian.Uint16(h[1:]), payload[:len(payload)-1], nil
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func longstr(s string) []byte {
	return append(u32(uint32(len(s))), s...)
}

// written waits for the content header the fake broker received last.
func (b *fakeBroker) written(tb testing.TB) []byte {
	tb.Helper()
	select {
	case h := <-b.headers:
		return h
	case <-time.After(5 * time.Second):
		tb.Fatal("no content header reached the broker")
		return nil
	}
}
