package memory

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/acemq/acemq/transport"
)

// Epoch is the instant a virtual clock made by [New] starts at. A fixed
// start keeps test output (x-death times, ages) the same on every run.
var Epoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is the broker's clock. A virtual clock (the default, or
// [NewClock]) stands still until [Clock.Advance] moves it, firing timers and
// expiring messages in deadline order; a real clock ([WithRealClock]) tells
// wall time. It implements [transport.Clock], so a server on the broker
// waits on the same time as the broker's queues. A Clock can also stand
// for a transport.Clock of another making given to [WithClock]: it then
// reads that clock's time and waits on it.
type Clock struct {
	real bool
	ext  transport.Clock // a clock of another making (foreign.go), or nil

	mu      sync.Mutex
	now     time.Time
	timers  timerHeap
	seq     uint64
	waiters int           // After channels not fired yet
	changed chan struct{} // closed and replaced whenever waiters changes
}

var _ transport.Clock = (*Clock)(nil)

// NewClock returns a virtual clock that reads start until advanced; a zero
// start is [Epoch].
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = Epoch
	}
	return &Clock{now: start, changed: make(chan struct{})}
}

func newRealClock() *Clock {
	return &Clock{real: true, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	if c.ext != nil {
		return c.ext.Now()
	}
	if c.real {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After is time.After on this clock: the channel receives the clock's time
// once d has passed on it. On a virtual clock a d of zero or less fires at
// once; anything else waits for Advance. On a clock of another making it
// is that clock's After, which [Clock.Pending] does not count.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	if c.ext != nil {
		return c.ext.After(d)
	}
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setWaiters(c.waiters + 1)
	if c.real {
		time.AfterFunc(d, func() {
			c.mu.Lock()
			c.setWaiters(c.waiters - 1)
			c.mu.Unlock()
			ch <- time.Now()
		})
		return ch
	}
	if d <= 0 {
		c.setWaiters(c.waiters - 1)
		ch <- c.now
		return ch
	}
	c.push(&timer{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves a virtual clock forward by d. Timers and message expiries
// falling due on the way fire one at a time in deadline order, each seeing
// Now() at its own deadline, so a message that expires at 40s is
// dead-lettered before a timer due at 41s fires. A receiver of an After
// channel runs on its own goroutine, after Advance fired it. On a real
// clock Advance sleeps for d, and on a clock of another making it waits
// for d to pass on that clock: move that clock instead.
func (c *Clock) Advance(d time.Duration) {
	if c.ext != nil {
		<-c.ext.After(d)
		return
	}
	if c.real {
		time.Sleep(d)
		return
	}
	c.mu.Lock()
	target := c.now.Add(max(d, 0))
	for len(c.timers) > 0 && !c.timers[0].at.After(target) {
		t := heap.Pop(&c.timers).(*timer)
		if t.at.After(c.now) {
			c.now = t.at
		}
		if t.ch != nil {
			c.setWaiters(c.waiters - 1)
			t.ch <- c.now // buffered and sent once: never blocks
			continue
		}
		c.mu.Unlock()
		t.fn() // takes the broker's lock, which is taken before ours
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// Pending returns how many After channels wait to fire: a test reads it to
// know the code under test is asleep on the clock. Message expiries are not
// counted. An After whose caller stopped waiting (a select took another
// case) still counts until it fires.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters
}

// BlockUntil returns once at least n After channels are pending, so a test
// advances only after the code under test went to sleep, without sleeping
// itself; or with ctx's error when ctx ends first.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if c.waiters >= n {
			c.mu.Unlock()
			return nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Clock) setWaiters(n int) {
	c.waiters = n
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Clock) push(t *timer) {
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
}

// schedule calls fn at a (on the broker's behalf: expiries). On a real
// clock fn runs on a timer goroutine counted in wg.
func (c *Clock) schedule(at time.Time, fn func(), wg *sync.WaitGroup) *timer {
	if c.ext != nil {
		return c.scheduleOn(at, fn, wg)
	}
	t := &timer{at: at, fn: fn}
	if c.real {
		wg.Add(1)
		t.wg = wg
		t.real = time.AfterFunc(time.Until(at), func() {
			defer wg.Done()
			fn()
		})
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.push(t)
	return t
}

// stop cancels a scheduled call that has not started.
func (c *Clock) stop(t *timer) {
	if t.cancel != nil {
		t.cancel()
		return
	}
	if t.real != nil {
		if t.real.Stop() {
			t.wg.Done()
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index >= 0 && t.index < len(c.timers) && c.timers[t.index] == t {
		heap.Remove(&c.timers, t.index)
	}
}

type timer struct {
	at    time.Time
	seq   uint64
	index int
	ch    chan time.Time // an After channel, or
	fn    func()         // a broker callback
	real  *time.Timer
	// cancel ends the wait of a call scheduled on a clock of another
	// making; nil otherwise.
	cancel func()
	wg     *sync.WaitGroup
}

// timerHeap orders timers by deadline, then by creation.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
