package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// triageReplay moves want messages of the group back, with acemq.Replay,
// and counts what it did (account).
func (a *app) triageReplay(t transport.Transport, res *actionOut, to string, want, limit int, keep bool, every time.Duration) (err error) {
	res.Action = "replay"
	target := to
	if target == "" {
		q, ok := queueOf(res.Queue)
		if !ok {
			return fmt.Errorf("%s is neither a .dlq nor a .parked queue: give --to", res.Queue)
		}
		target = q
	}
	res.To = target
	if _, err := t.Inspect(a.ctx, target); err != nil {
		return err
	}
	prog := a.newProgress(res.Queue+" -> "+target+": moved", want, every)
	defer prog.stop()
	sel := res.Group
	r, err := acemq.Replay(a.ctx, t, res.Queue, acemq.ReplayOptions{To: target, Limit: limit, KeepAttempts: keep,
		Filter:   func(env acemq.Envelope, _ []byte) bool { return triage.Matches(sel, env.Error) },
		Progress: func(r acemq.ReplayResult) { prog.set(r.Moved) }})
	res.Moved, res.Taken = r.Moved, r.Moved+r.Skipped
	switch {
	case a.ctx.Err() != nil && err != nil && errors.Is(err, context.Canceled):
		res.Stopped, err = stoppedInterrupted, nil // said as interrupted
	case err != nil:
		res.Stopped = stoppedError
	case r.Stopped == acemq.ReplayDrained:
		res.Stopped = stoppedDrained
	default:
		res.Stopped = stoppedLimit
	}
	a.account(t, res, 0) // Replay gives back only what its filter skips: none of the group
	return err
}

// queueOf is the queue a .dlq or .parked queue belongs to.
func queueOf(setAside string) (string, bool) {
	for _, suffix := range []string{acemq.DeadLetterQueue(""), acemq.ParkedQueue("")} {
		if q, ok := strings.CutSuffix(setAside, suffix); ok && q != "" {
			return q, true
		}
	}
	return "", false
}

// triageDiscard moves want messages of the group into arch, one at a time:
// each is in the archive (written and synced, or confirmed) before its
// original is acknowledged. The others are held and given back at the end,
// in their order, as a replay does. It counts what it did (account): each
// message taken, each moved, each of the group given back.
func (a *app) triageDiscard(t transport.Transport, res *actionOut, arch archive, want, limit int, every time.Duration) (err error) {
	prog := a.newProgress(res.Queue+" -> "+arch.name()+": moved", want, every)
	defer prog.stop()
	var held []transport.Delivery
	ofGroup := 0 // of held, those of the group
	defer func() {
		for _, d := range held {
			_ = d.Reject(true)
		}
		a.account(t, res, ofGroup)
	}()
	res.Stopped = stoppedLimit
	for limit <= 0 || res.Moved < limit {
		if a.ctx.Err() != nil {
			res.Stopped = stoppedInterrupted
			return nil // said as interrupted
		}
		// Not cancelled: a message taken is always either moved or held.
		d, ok, err := t.Get(context.WithoutCancel(a.ctx), res.Queue)
		if err != nil {
			res.Stopped = stoppedError
			return err
		}
		if !ok {
			res.Stopped = stoppedDrained
			return nil
		}
		res.Taken++
		if !triage.Matches(res.Group, acemq.EnvelopeOf(d).Error) {
			held = append(held, d)
			continue
		}
		if err := arch.keep(d); err != nil {
			held = append(held, d)
			ofGroup++
			res.Stopped = stoppedError
			return fmt.Errorf("archive %s: %w; the message is still in %s", arch.name(), err, res.Queue)
		}
		if err := d.Ack(); err != nil {
			res.Stopped = stoppedError
			return fmt.Errorf("message %s is in %s but could not be acknowledged, so it is in %s too: %w", acemq.EnvelopeOf(d).ID, arch.name(), res.Queue, err)
		}
		res.Moved++
		prog.set(res.Moved)
	}
	return nil
}

// moveFlags are acemq triage's flags for a move.
type moveFlags struct {
	replay                             bool
	to, toFile, toQueue, operator, why string
	limit                              int
	keep                               bool
	every                              time.Duration
	asJSON                             bool
}

// moveGroup moves res.Group out of res.Queue, a replay or a discard as f
// says, limit at most (0: the whole group): it waits until the queue
// shows the res.Before messages the read gave back, moves, and fills in
// how the move ended. The one move of a queue, alone or in a set.
func (a *app) moveGroup(t transport.Transport, res *actionOut, f moveFlags, limit int) error {
	a.settle(t, res.Queue, res.Before)
	want := res.Matched
	if limit > 0 {
		want = min(want, limit)
	}
	var err error
	if f.replay {
		err = a.triageReplay(t, res, f.to, want, limit, f.keep, f.every)
	} else {
		var arch archive
		if arch, err = a.openArchive(t, f.toFile, f.toQueue, res.Queue, res.Group, f.operator, f.why); err == nil {
			res.Action, res.To = "discard", arch.name()
			err = a.triageDiscard(t, res, arch, want, limit, f.every)
			if cerr := arch.close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	res.Interrupted = a.ctx.Err() != nil
	if err != nil && res.Stopped == "" { // the move did not start
		res.Stopped, res.After = stoppedError, a.settle(t, res.Queue, 0)
	}
	if err != nil {
		res.Error = a.redact(escapeErr(err))
	}
	return err
}

// moveDone prints a move's result (print, or as JSON) and returns its
// exit status: 1 when it was interrupted or failed.
func (a *app) moveDone(fs *flag.FlagSet, res actionOut, err error, asJSON bool, print func(actionOut)) int {
	if asJSON {
		a.printJSON(res)
	} else {
		print(res)
	}
	switch {
	case res.Interrupted:
		fmt.Fprintf(a.stderr, "interrupted: moved %d, left %d\n", res.Moved, res.Left)
		return exitError
	case err != nil:
		return a.fail(fs, errors.New(res.Error))
	}
	return exitOK
}
