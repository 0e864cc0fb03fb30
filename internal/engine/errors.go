package engine

import "errors"

// The errors Run returns or a handler answers with, re-exported by the
// root package under the same names (acemq.ErrCutOff, ...), where their
// documentation is: errors.Is matches either name.
var (
	ErrCutOff          = errors.New("acemq: shutdown deadline cut a handler off; its message goes back to the broker")
	ErrMissingTopology = errors.New("acemq: topology missing")
	ErrNeedsID         = errors.New("acemq: the message has no id of its own; stamping one on it")
)
