// Package fieldvalue maps Go integers onto the AMQP field-table types both
// transports deliver, so that a header reads back the same from either.
package fieldvalue

import (
	"fmt"
	"math"
)

// Integer returns v as the signed AMQP type a broker hands back: int as
// int32 when it fits (else int64), unsigned types one size wider and signed.
// ok is false when v is not an integer of a type that needs mapping; err
// says an unsigned value overflows a signed 64-bit field.
func Integer(v any) (out any, ok bool, err error) {
	switch v := v.(type) {
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return int32(v), true, nil
		}
		return int64(v), true, nil
	case uint8:
		return int16(v), true, nil
	case uint16:
		return int32(v), true, nil
	case uint32:
		return int64(v), true, nil
	case uint:
		return unsigned(uint64(v))
	case uint64:
		return unsigned(v)
	}
	return nil, false, nil
}

func unsigned(v uint64) (any, bool, error) {
	if v > math.MaxInt64 {
		return nil, true, fmt.Errorf("integer %d overflows a signed 64-bit field", v)
	}
	return int64(v), true, nil
}

// Array maps each element of an AMQP array through f, naming the element
// that failed.
func Array(v []any, f func(any) (any, error)) ([]any, error) {
	out := make([]any, len(v))
	for i, e := range v {
		fe, err := f(e)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = fe
	}
	return out, nil
}

// Strings is a []string as the AMQP array a broker hands back.
func Strings(v []string) []any {
	out := make([]any, len(v))
	for i, e := range v {
		out[i] = e
	}
	return out
}
