package outbox

import (
	"context"
	"errors"
	"sync"
)

// pipeline streams a relay's batches through three overlapping stages:
// claim (the Run goroutine), publish (a goroutine per message, at most
// concurrency of them awaiting a confirm across batches) and settle (one
// goroutine, batches in claim order). A batch is claimed once every
// message of the one before it has been started, so publishes start in
// write order and the transport never waits for the database; each batch
// settles once all its publishes have ended.
type pipeline struct {
	r     *Relay
	work  context.Context
	slots chan struct{}  // one per publish awaiting a confirm
	queue chan *inflight // to the settler, in claim order
	done  chan struct{}  // closed when the settler has ended

	mu  sync.Mutex
	err error // settle errors not yet reported by step
}

// inflight is a claimed batch being published.
type inflight struct {
	*claimed
	results []result
	wg      sync.WaitGroup // its publishes
	settled chan struct{}
}

func newPipeline(r *Relay, work context.Context) *pipeline {
	p := &pipeline{
		r:     r,
		work:  work,
		slots: make(chan struct{}, r.cfg.concurrency),
		queue: make(chan *inflight, 1),
		done:  make(chan struct{}),
	}
	go p.settler()
	return p
}

// settler settles each batch once its publishes have ended.
func (p *pipeline) settler() {
	defer close(p.done)
	for f := range p.queue {
		f.wg.Wait()
		if err := p.r.settle(p.work, f.claimed, f.results); err != nil {
			p.mu.Lock()
			p.err = errors.Join(p.err, err)
			p.mu.Unlock()
		}
		close(f.settled)
	}
}

// close waits for every batch handed to the settler and returns the
// errors not yet reported.
func (p *pipeline) close() error {
	close(p.queue)
	<-p.done
	return p.takeErr()
}

func (p *pipeline) takeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

// step claims a batch, starts its publishes in order and hands it to the
// settler. more says a next batch may be due at once, found that this
// claim found rows; err is this claim's error or that of settles since
// the last step. A batch cut at its byte
// budget settles before step returns, so that the rows it left are claimed
// next, in order. ctx ending stops new publishes; what was started is
// settled.
func (p *pipeline) step(ctx context.Context) (more, found bool, err error) {
	if err := p.takeErr(); err != nil || ctx.Err() != nil {
		return false, false, err
	}
	b, err := p.r.claim(p.work)
	if err != nil || b == nil {
		return false, false, err
	}
	f := &inflight{claimed: b, results: make([]result, len(b.rows)), settled: make(chan struct{})}
	p.start(ctx, f)
	p.queue <- f
	if b.cut || ctx.Err() != nil {
		<-f.settled
		return b.more, true, p.takeErr()
	}
	return b.more, true, nil
}

// start publishes f's rows, starting them in order as slots free up, and
// returns once all are started or ctx ended (the rest stay untouched).
func (p *pipeline) start(ctx context.Context, f *inflight) {
	for i := range f.rows {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			<-p.slots
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { <-p.slots }()
			f.results[i] = p.r.publish(p.work, &f.rows[i]) // recovers a row's panic as that row's failure
		}()
	}
}
