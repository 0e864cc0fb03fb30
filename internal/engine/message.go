package engine

import (
	"time"

	"github.com/acemq/acemq/internal/wire"
)

// message is one delivery as the engine holds it: the handler's message,
// opaque here, and its envelope inside it.
type message struct {
	user any
	env  *wire.Envelope
}

func (m message) ID() string { return m.env.ID }

func (m message) Attempt() int { return m.env.Attempt }

// ageOf is the message's age; a producer's clock may be ahead of ours.
func ageOf(env wire.Envelope, now time.Time) time.Duration { return max(now.Sub(env.CreatedAt), 0) }
