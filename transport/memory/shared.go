package memory

import "sync"

var shared struct {
	mu      sync.Mutex
	brokers map[string]*Broker
}

// Shared returns the process's broker of that name, made on first use: the
// broker a "memory://name" URL names (dial.Transport), so that a service and
// whatever else in the process is configured with the same URL meet on one
// broker. It tells wall time (WithRealClock): a service run on it retries
// and expires as it would on RabbitMQ. It lives as long as the process; a
// test that wants a virtual clock uses New (or acemqtest).
func Shared(name string) *Broker {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if b := shared.brokers[name]; b != nil {
		return b
	}
	if shared.brokers == nil {
		shared.brokers = map[string]*Broker{}
	}
	b := New(WithRealClock())
	shared.brokers[name] = b
	return b
}
