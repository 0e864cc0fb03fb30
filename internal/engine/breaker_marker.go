package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/redact"
	"github.com/acemq/acemq/transport"
)

// While a queue's breaker is not closed, the engine keeps its marker: an
// exclusive queue Q.breaker.<instance> whose arguments are the breaker's
// state (docs/wire-contract.md, "Breaker markers"), so that the operators'
// tools, which read only the broker, can show an open breaker, since when
// and why. Exclusive, it goes with the connection: a killed process
// leaves none behind.

// markerRefresh is how often, in real time, a marker that stands is
// declared again, so that one lost with a connection comes back on the
// next.
const markerRefresh = 30 * time.Second

// markerWhyMax bounds the why a marker carries.
const markerWhyMax = 1024

// markerFor is the marker queue's declaration for the breaker's status
// st, or false when the breaker is closed and there is none.
func markerFor(queue, instance string, st flow.Status) (transport.Queue, bool) {
	if st.State == flow.Closed {
		return transport.Queue{}, false
	}
	args := map[string]any{
		"x-acemq-breaker-queue":    queue,
		"x-acemq-breaker-state":    st.State.String(),
		"x-acemq-breaker-since":    st.Since.UnixMilli(),
		"x-acemq-breaker-why":      markerWhy(st.Why),
		"x-acemq-breaker-instance": instance,
		"x-max-length":             0,
		"x-overflow":               "reject-publish",
		"x-queue-type":             "classic",
	}
	if st.State == flow.Open {
		args["x-acemq-breaker-until"] = st.Until.UnixMilli()
	}
	return transport.Queue{Name: markerName(queue, instance), Exclusive: true, Args: args}, true
}

// markerWhy is why as a marker carries it: whoever can list the broker's
// queues reads it, so a URL's password in it (a handler's error naming
// its database) is hidden; and it is cut to markerWhyMax bytes, ending in
// "…" when cut.
func markerWhy(why string) string {
	why = redact.URLsIn(why)
	if len(why) <= markerWhyMax {
		return why
	}
	return cutUTF8(why, markerWhyMax-len("…")) + "…"
}

// markerName is Q.breaker.<instance>, cut to AMQP's 255 bytes with a hash
// of the whole at its end when it would pass them.
func markerName(queue, instance string) string {
	name := queue + ".breaker." + instance
	if len(name) <= 255 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "." + hex.EncodeToString(sum[:8])
	return cutUTF8(name, 255-len(tail)) + tail
}

// cutUTF8 is s cut to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// newInstance is this engine's id in marker names: the host's first
// label, the process id and a random suffix, in letters, digits, - and _.
func newInstance() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	host = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
			return r
		}
		return -1
	}, host)
	if len(host) > 63 {
		host = host[:63]
	}
	if host == "" {
		host = "host"
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// wakeMarker asks the marker keeper to look at the breaker again.
func (c *consumer) wakeMarker() {
	select {
	case c.markerWake <- struct{}{}:
	default:
	}
}

// keepMarker keeps the queue's marker in step with its breaker until the
// stop is asked for, and then deletes it. A transport that cannot delete
// a queue gets no marker (it could not take one back). A refusal is
// logged once until a declare works again; the next change or refresh
// tries again.
func (c *consumer) keepMarker() {
	del, ok := c.e.t.(transport.QueueDeleter)
	if !ok {
		return
	}
	var (
		standing *transport.Queue
		warned   bool
	)
	apply := func(do func(context.Context) error, what string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
		defer cancel()
		err := do(ctx)
		if err != nil && !warned {
			warned = true
			c.e.log.Warn("acemq: "+what+" the breaker's marker queue; acemq status will not show this breaker", zap.String("queue", c.q.name), zap.Error(err))
		}
		return err == nil
	}
	remove := func() {
		name := standing.Name
		if apply(func(ctx context.Context) error { return del.DeleteQueue(ctx, name) }, "delete") {
			standing = nil
		}
	}
	for {
		want, open := markerFor(c.q.name, c.e.instance, c.q.breaker.Status())
		if standing != nil && (!open || !sameMarker(*standing, want)) {
			remove()
		}
		if open && (standing == nil || sameMarker(*standing, want)) {
			if apply(func(ctx context.Context) error {
				return c.e.t.Declare(ctx, transport.Topology{Queues: []transport.Queue{want}})
			}, "declare") {
				standing, warned = &want, false
			}
		}
		// The refresh is for the connection, which lives in real time, not
		// on the engine's clock: a test's virtual clock sees no wait of it.
		var refresh <-chan time.Time
		var timer *time.Timer
		if standing != nil || open {
			timer = time.NewTimer(markerRefresh)
			refresh = timer.C
		}
		select {
		case <-c.markerWake:
		case <-refresh:
		case <-c.e.stop.requested:
			if standing != nil {
				remove()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// sameMarker says a and b declare the same marker, arguments and all.
func sameMarker(a, b transport.Queue) bool {
	if a.Name != b.Name || len(a.Args) != len(b.Args) {
		return false
	}
	for k, v := range a.Args {
		if b.Args[k] != v {
			return false
		}
	}
	return true
}
