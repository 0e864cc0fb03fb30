package transport

// Int64 reads an integer header or argument value of any Go integer type,
// whatever width the transport delivered it at. Unsigned values above
// math.MaxInt64 and non-integers are false.
func Int64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		return int64(n), uint64(n) <= 1<<63-1
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), n <= 1<<63-1
	}
	return 0, false
}
