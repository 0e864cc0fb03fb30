package flow

// window is the last n outcomes that counted, as a ring of bits (1: a
// failure), with the number of failures kept as they come and go so that
// the ratio costs nothing to read. Pushing allocates nothing.
type window struct {
	bits     []uint64
	size     int // n
	pos      int // the slot the next outcome goes to
	filled   int // outcomes held, up to size
	failures int
}

func newWindow(size int) window {
	return window{bits: make([]uint64, (size+63)/64), size: size}
}

// push records one outcome, forgetting the oldest once the window is full.
func (w *window) push(failed bool) {
	word, bit := w.pos/64, uint64(1)<<(w.pos%64)
	if w.filled == w.size {
		if w.bits[word]&bit != 0 {
			w.failures--
		}
	} else {
		w.filled++
	}
	if failed {
		w.bits[word] |= bit
		w.failures++
	} else {
		w.bits[word] &^= bit
	}
	w.pos++
	if w.pos == w.size {
		w.pos = 0
	}
}

func (w *window) reset() {
	clear(w.bits)
	w.pos, w.filled, w.failures = 0, 0, 0
}
