package main

import (
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// What acemq triage reports: a read's groups (triageOut) and a move's
// counts (actionOut), as printed and as --json gives them.

// triageGroup is a group as triage prints it.
type triageGroup struct {
	triage.Group
	SampleBody string `json:"sample_body"` // an excerpt, escaped
}

type triageOut struct {
	Queue  string        `json:"queue"`
	Depth  int           `json:"depth"` // ready messages when triage began
	Read   int           `json:"read"`
	Groups []triageGroup `json:"groups"`
	// Partitions are the queues read for a partitioned queue's
	// set-aside queue (triage_partitions.go), by index.
	Partitions []triageSource `json:"partitions,omitempty"`
}

// actionOut is what a replay or discard of a group did, counted as it
// happened: every figure is a count of messages the move took, moved or
// gave back, or one the broker gave, never one worked out from another, so
// none can be negative, and a queue that changed while it was read (another
// reader giving messages back, new dead letters) is said, not hidden.
type actionOut struct {
	Queue  string `json:"queue"`
	Group  string `json:"group"`
	Action string `json:"action"` // replay or discard
	To     string `json:"to"`     // a queue, or the archive file
	// Matched is how many of the group triage counted when it read the
	// queue; the move can find more (or fewer) if the queue changed since.
	Matched int `json:"matched"`
	// Moved is how many were moved: each counted once its copy was safe
	// and its original acknowledged.
	Moved int `json:"moved"`
	// Left is how many of the group are still in the queue as far as the
	// move knows: those it took and gave back, and, when it stopped before
	// the queue was empty (--limit, an error, an interruption), those
	// counted when read that it did not reach.
	Left int `json:"left"`
	// Taken is how many messages the move took from the queue, of the
	// group or not: a pass to the end takes every message then ready.
	Taken int `json:"taken"`
	// Grew is by how many messages the queue grew while it was read: how
	// many more the move took than were ready when triage began.
	Grew    int    `json:"grew,omitempty"`
	Before  int    `json:"before"` // ready when triage began
	After   int    `json:"after"`  // ready at the end, as the broker counts them; -1 when it could not be asked
	Stopped string `json:"stopped"`
	// Interrupted: SIGINT, SIGTERM or SIGHUP stopped the move.
	Interrupted bool   `json:"interrupted,omitempty"`
	Error       string `json:"error,omitempty"`
	// Partitions, for a move over a partitioned queue's set-aside queues:
	// each partition's move that held some of the group, by index; the
	// counts above add them up (Before and After over those partitions).
	Partitions []actionOut `json:"partitions,omitempty"`
}

// Why a move stopped.
const (
	stoppedDrained     = "drained"     // nothing more in the queue
	stoppedLimit       = "limit"       // --limit reached
	stoppedInterrupted = "interrupted" // a signal
	stoppedError       = "error"
)

// account fills in what follows from the move's own counts, once it has
// ended: the group left behind, by how much the queue grew, and the
// broker's count of what is ready now (waiting, a few seconds at most, for
// what was given back to be requeued).
func (a *app) account(t transport.Transport, res *actionOut, givenBackOfGroup int) {
	res.Left = givenBackOfGroup
	if res.Stopped != stoppedDrained {
		res.Left += max(0, res.Matched-res.Moved-givenBackOfGroup)
	}
	res.Grew = max(0, res.Taken-res.Before)
	res.After = a.settle(t, res.Queue, res.Taken-res.Moved)
}
