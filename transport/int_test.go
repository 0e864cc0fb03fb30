package transport_test

import (
	"math"
	"testing"

	"github.com/acemq/acemq/transport"
)

func TestInt64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    any
		want int64
		ok   bool
	}{
		{int(7), 7, true}, {int8(-7), -7, true}, {int16(300), 300, true}, {int32(1 << 30), 1 << 30, true},
		{int64(math.MaxInt64), math.MaxInt64, true}, {uint8(255), 255, true}, {uint16(65535), 65535, true},
		{uint32(math.MaxUint32), math.MaxUint32, true}, {uint64(math.MaxInt64), math.MaxInt64, true},
		{uint64(math.MaxUint64), 0, false}, {"7", 0, false}, {7.0, 0, false}, {nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := transport.Int64(tt.v)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("Int64(%T %v) = %d, %v; want %d, %v", tt.v, tt.v, got, ok, tt.want, tt.ok)
		}
	}
}
