package acemq

import (
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/serverhook"
)

// The module's test kit reaches a server's engine through
// internal/serverhook, so that what only a test on a virtual clock needs
// (Engine.Waiting) is not part of Server's API.
func init() {
	serverhook.Engine = func(s any) *engine.Engine {
		srv := s.(*Server)
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.run
	}
}
