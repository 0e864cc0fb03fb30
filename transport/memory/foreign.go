package memory

import (
	"sync"
	"time"

	"github.com/acemq/acemq/transport"
)

// foreignClock is a *Clock that stands for c, a transport.Clock of another
// making given to WithClock: it reads c's time and waits on c.
func foreignClock(c transport.Clock) *Clock {
	return &Clock{ext: c, changed: make(chan struct{})}
}

// scheduleOn calls fn once at has come on the clock of another making, on
// a goroutine counted in wg, unless the timer is stopped first: c's After
// is all such a clock offers to wait on.
func (c *Clock) scheduleOn(at time.Time, fn func(), wg *sync.WaitGroup) *timer {
	stop := make(chan struct{})
	var once sync.Once
	t := &timer{at: at, fn: fn, cancel: func() { once.Do(func() { close(stop) }) }}
	due := c.ext.After(at.Sub(c.ext.Now()))
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-due:
			fn()
		case <-stop:
		}
	}()
	return t
}
