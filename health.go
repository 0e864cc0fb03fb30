package acemq

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// ErrNotReady is what CheckReady returns, wrapped with what is not ready.
var ErrNotReady = errors.New("acemq: not ready")

// Ready returns a channel that is closed once Run has declared (or
// checked) the topology and subscribed every queue, so that a service logs
// "started", or a test publishes, only then. It stays open when Run fails
// before that: wait on it together with Run's result.
//
//	go func() { errc <- srv.Run(ctx) }()
//	select {
//	case <-srv.Ready():
//	case err := <-errc:
//		return err
//	}
func (s *Server) Ready() <-chan struct{} { return s.readyCh() }

func (s *Server) readyCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready == nil {
		s.ready = make(chan struct{})
	}
	return s.ready
}

// markReady closes Ready's channel, once.
func (s *Server) markReady() {
	ch := s.readyCh()
	s.readyOnce.Do(func() { close(ch) })
}

// CheckReady says whether the server can take messages now, for a
// readiness probe: Run has subscribed every queue, no stop has begun,
// every queue's consumer is consuming (not declaring and consuming again
// after the broker ended it, and not refused for now by the broker: a
// connection limit reached, a vhost down), and the transport is connected
// and not blocked by the broker. It returns nil when ready, else
// ErrNotReady wrapped with what is not, in the broker's words. A refusal
// for now makes the server not ready, never ends Run: it is ready again
// once the broker takes the connection.
func (s *Server) CheckReady() error {
	s.mu.Lock()
	e := s.run
	s.mu.Unlock()
	select {
	case <-s.readyCh():
	default:
		if e != nil {
			if err := e.Refused(); err != nil {
				return fmt.Errorf("%w: Run has not subscribed every queue yet: %w", ErrNotReady, err)
			}
		}
		return fmt.Errorf("%w: Run has not subscribed every queue yet", ErrNotReady)
	}
	if err := e.CheckReady(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return nil
}

// CheckLive says whether the server is alive, for a liveness probe: Run
// has been called and has not returned. A broker that is down makes the
// server not ready, never not alive: restarting the process would not
// bring the broker back.
func (s *Server) CheckLive() error {
	s.mu.Lock()
	e := s.run
	s.mu.Unlock()
	if e == nil {
		return errors.New("acemq: Run has not been called")
	}
	select {
	case <-e.Ended():
		return errors.New("acemq: Run has returned")
	default:
		return nil
	}
}

// ReadyHandler serves CheckReady over HTTP, for a readiness probe: 200
// and {"status":"ok"}, or 503 and {"status":"unavailable","reason":...}.
func (s *Server) ReadyHandler() http.Handler { return probe(s.CheckReady) }

// LiveHandler serves CheckLive over HTTP, for a liveness probe, as
// ReadyHandler does.
func (s *Server) LiveHandler() http.Handler { return probe(s.CheckLive) }

func probe(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		body := map[string]string{"status": "ok"}
		if err := check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			body = map[string]string{"status": "unavailable", "reason": err.Error()}
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}
