package outbox

import (
	"context"
	"errors"
)

// pipeline runs a relay's batches one after another, overlapping each
// batch's settle (the delete and the commit) with the claim and publishes
// of the next. Publishes never overlap: a batch is claimed while the one
// before it settles, but published only once that one's publishes have all
// ended. At most one settle is in flight.
type pipeline struct {
	r        *Relay
	settling chan error // the settle in flight; nil when none
}

// wait waits for the settle in flight, if any, and returns its error.
func (p *pipeline) wait() error {
	if p.settling == nil {
		return nil
	}
	err := <-p.settling
	p.settling = nil
	return err
}

// step claims a batch, publishes it and starts its settle. more says a
// next batch may be due at once. The rows of the settling batch are
// locked, so the next claim skips them; a batch cut at its byte budget
// settles before the next claim instead, so that the rows it left are
// claimed next, in order. ctx ending stops new publishes and waits for the
// settle.
func (p *pipeline) step(ctx, work context.Context) (more bool, err error) {
	if ctx.Err() != nil {
		return false, p.wait()
	}
	b, err := p.r.claim(work)
	if err != nil || b == nil {
		return false, errors.Join(err, p.wait())
	}
	results := p.r.publishAll(ctx, work, b.rows)
	prev := p.wait()
	settling := make(chan error, 1)
	p.settling = settling
	go func() { settling <- p.r.settle(work, b, results) }()
	if b.cut || ctx.Err() != nil {
		return b.more, errors.Join(prev, p.wait())
	}
	return b.more, prev
}
