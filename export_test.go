package acemq

import "time"

// SetRedeliverEvery shortens how often s sends due messages whose
// destination was missing round again, so a test need not wait 10 s.
func SetRedeliverEvery(s *Server, d time.Duration) { s.redeliverEvery = d }

// BreakerMarker is the name of the marker queue s keeps for queue's
// breaker while it is open or half-open; "" before Run.
func BreakerMarker(s *Server, queue string) string {
	s.mu.Lock()
	e := s.run
	s.mu.Unlock()
	if e == nil {
		return ""
	}
	return e.BreakerMarker(queue)
}
