package acemq

import "time"

// SetRedeliverEvery shortens how often s sends due messages whose
// destination was missing round again, so a test need not wait 10 s.
func SetRedeliverEvery(s *Server, d time.Duration) { s.redeliverEvery = d }
