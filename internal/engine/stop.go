package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// stop is one engine's shutdown. Its signals close once each, in this
// order:
//
//  1. requested: Shutdown, Close, Run's context or a failed consumer asked
//     for a stop, and the deadline is fixed (the earliest one asked for
//     wins). From then on a worker gives back every delivery it takes.
//  2. cancelled: the drain has cancelled every consumer at the broker, so a
//     copy republished to a work queue can no longer come back to this
//     engine: in-process waits stop waiting and publish at once.
//  3. cut, only if the deadline passes first: handlers' context ends, the
//     delivery of every handler still running goes back to the broker at
//     once, the delivery loops stop waiting for the broker, and held copies
//     stop retrying (an unknown outcome: their originals go back).
//  4. ended: every goroutine of the engine has returned (the engine's
//     running group), the subscriptions are closed, and Run returns.
//
// Every goroutine the engine starts is counted in running by a goroutine
// that is itself counted (or by Run before it waits), so running.Wait
// cannot miss one started late. The one exception to "every goroutine has
// returned" is a handler that ignores its context: at the cut its worker
// is counted as ended on its behalf (consumer.cutOff), so the stop is
// bounded by the deadline; the goroutine ends when the handler returns,
// and its answer is discarded.
type stop struct {
	mu       sync.Mutex
	deadline time.Time
	asked    time.Time // when the stop was first requested

	requested chan struct{}
	cancelled chan struct{}
	cut       chan struct{}
	ended     chan struct{}

	cutHandlers atomic.Int64 // handlers the deadline cut off
	handled     atomic.Int64 // deliveries settled by their handler's answer, for the drain's line
	givenBack   atomic.Int64 // deliveries given back to the broker once the stop was requested
}

func newStop() *stop {
	return &stop{
		requested: make(chan struct{}),
		cancelled: make(chan struct{}),
		cut:       make(chan struct{}),
		ended:     make(chan struct{}),
	}
}

// request asks for a stop by deadline; an earlier deadline than one asked
// for before wins. It returns at once.
func (st *stop) request(deadline time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.deadline.IsZero() || deadline.Before(st.deadline) {
		st.deadline = deadline
	}
	if st.asked.IsZero() {
		st.asked = time.Now()
	}
	closeOnce(st.requested)
}

// requestedAt is when the stop was first requested; zero before.
func (st *stop) requestedAt() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.asked
}

// settled counts a delivery that ended with outcome o: handled, unless the
// server gave it back or holds it (gaveBack counts the give-backs).
func (st *stop) settled(o outcome) {
	if o != outcomeGivenBack && o != outcomeHeld {
		st.handled.Add(1)
	}
}

// gaveBack counts a delivery given back to the broker, once the stop was
// requested: the drain's line says how many it returned unhandled.
func (st *stop) gaveBack() {
	if isClosed(st.requested) {
		st.givenBack.Add(1)
	}
}

func (st *stop) deadlineOf() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.deadline
}

// cutOff says whether the deadline cut a handler off; final once ended is
// closed.
func (st *stop) cutOff() bool { return st.cutHandlers.Load() > 0 }

// drain carries out phases 2 to 4: cancel the consumers, give back what
// arrives undelivered to a handler, wait for running handlers and held
// messages until the deadline, cut off what is left, then release the
// subscriptions.
func (e *Engine) drain() {
	deadline := e.stop.deadlineOf()
	cancelCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(5*time.Second))
	for _, c := range e.consumers {
		if err := c.subscription().Cancel(cancelCtx); err != nil {
			e.log.Warn("acemq: cancel consumer", zap.String("queue", c.q.name), zap.Error(err))
		}
	}
	cancel()
	for _, c := range e.consumers {
		e.spawn(c.giveBackUnstarted)
	}
	close(e.stop.cancelled)
	finished := make(chan struct{})
	go func() {
		e.running.Wait()
		close(finished)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		close(e.stop.cut)
		e.cancelHandlers()
		for _, c := range e.consumers {
			e.stop.cutHandlers.Add(int64(c.cutOff()))
		}
		<-finished // held copies give up at once; abandoned workers count as ended
	}
	e.cancelHandlers()
	e.closeSubscriptions()
}

func (e *Engine) closeSubscriptions() {
	for _, c := range e.consumers {
		if err := c.subscription().Close(); err != nil {
			e.log.Debug("acemq: close subscription", zap.String("queue", c.q.name), zap.Error(err))
		}
		c.mu.Lock()
		retired := c.retired
		c.mu.Unlock()
		for _, l := range retired { // settled by now: every goroutine of the run has ended
			l.close()
		}
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// spawn runs f on a goroutine of the engine's: the drain waits for it.
// Call it from Run's goroutine or from another goroutine of the engine's.
func (e *Engine) spawn(f func()) {
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		f()
	}()
}
