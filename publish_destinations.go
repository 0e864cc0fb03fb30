package acemq

import (
	"sync"
	"time"
)

// A delayed publish checks that its queue exists before it goes to the
// delay queues, whose level exchanges route everything: a passive declare,
// a round trip before the publish's own. A Publisher remembers the queues
// it found for destinationsKnownFor, so that a stream of delayed
// publishes to the same queues pays that round trip once in a while, not
// every time (issue 28: delayed publish at 0.30× a plain one).
//
// What the cache can miss is a queue deleted within the window: a message
// delayed to it then is not refused at publish; it waits its delay, and at
// its due time reaches no queue, so the broker routes it to
// acemq.delay.v1.undeliverable, where it waits and is sent round every
// RedeliverEvery until the queue is back (docs/wire-contract.md, "Delays
// (v1)"). It is late or waits, never lost; a queue that was never there
// is refused at publish, as before.

// destinationsKnownFor is how long a queue found by a delayed publish's
// check is taken to exist without checking again.
const destinationsKnownFor = 10 * time.Second

// destinationsMax bounds what a Publisher remembers; past it, it forgets
// all and starts again (a publisher to millions of queues checks each).
const destinationsMax = 4096

// destinations are the queues a Publisher's delayed publishes found, and
// until when each is taken to exist, on the wall clock: it is about the
// broker's state, not message time.
type destinations struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// known says whether queue was found recently enough.
func (d *destinations) known(queue string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.until[queue]
	return ok && now.Before(t)
}

// found remembers queue as there at now.
func (d *destinations) found(queue string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.until == nil || len(d.until) >= destinationsMax {
		d.until = make(map[string]time.Time)
	}
	d.until[queue] = now.Add(destinationsKnownFor)
}

// forget drops queue, found missing.
func (d *destinations) forget(queue string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.until, queue)
}
