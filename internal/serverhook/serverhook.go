// Package serverhook lets the module's own test kit (acemqtest) reach the
// engine of a running acemq.Server without widening the Server's API:
// package acemq sets Engine when it is loaded.
package serverhook

import "github.com/acemq/acemq/internal/engine"

// Engine returns the engine of the *acemq.Server s: the Run under way, or
// the last one; nil before the first Run.
var Engine func(s any) *engine.Engine
