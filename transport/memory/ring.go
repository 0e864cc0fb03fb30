package memory

// ring is a double-ended queue of messages on a power-of-two ring buffer:
// a queue's ready messages, oldest first. Pushing and popping at either end
// allocate only when it grows.
type ring struct {
	buf  []*message
	head int
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) *message { return r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring) front() *message {
	if r.n == 0 {
		return nil
	}
	return r.buf[r.head]
}

func (r *ring) pushBack(m *message) {
	r.grow()
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = m
	r.n++
}

func (r *ring) pushFront(m *message) {
	r.grow()
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = m
	r.n++
}

func (r *ring) popFront() *message {
	if r.n == 0 {
		return nil
	}
	m := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return m
}

func (r *ring) grow() {
	if r.n < len(r.buf) {
		return
	}
	size := max(2*len(r.buf), 16)
	buf := make([]*message, size)
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}

// clear drops every message and returns them, oldest first.
func (r *ring) clear() []*message {
	out := make([]*message, 0, r.n)
	for r.n > 0 {
		out = append(out, r.popFront())
	}
	return out
}
