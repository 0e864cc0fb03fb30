package flow

import "testing"

// The ring keeps the same count as a naive count over the last n, across
// word boundaries and many wraps.
func TestWindowAgainstANaiveCount(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 2, 63, 64, 65, 130} {
		w := newWindow(size)
		var all []bool
		for i := range size * 7 {
			failed := (i*7+i/3)%5 < 2
			w.push(failed)
			all = append(all, failed)
			last := all[max(0, len(all)-size):]
			want := 0
			for _, f := range last {
				if f {
					want++
				}
			}
			if w.failures != want || w.filled != len(last) {
				t.Fatalf("size %d after %d pushes: %d failures of %d, want %d of %d", size, i+1, w.failures, w.filled, want, len(last))
			}
		}
		w.reset()
		if w.failures != 0 || w.filled != 0 {
			t.Fatalf("size %d: reset left %d of %d", size, w.failures, w.filled)
		}
	}
}
