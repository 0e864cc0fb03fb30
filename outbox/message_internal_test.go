package outbox

import (
	"reflect"
	"testing"
)

func TestHeadersRoundTrip(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"s": "text", "b": true, "i": 42, "big": int64(1) << 60, "f": 0.25, "whole float": 3.0,
		"nil": nil, "bytes": []byte("hi"), "list": []any{1, "two"}, "map": map[string]any{"n": 7},
	}
	enc, err := encodeHeaders(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeHeaders(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"s": "text", "b": true, "i": int64(42), "big": int64(1) << 60, "f": 0.25, "whole float": int64(3),
		"nil": nil, "bytes": "aGk=", "list": []any{int64(1), "two"}, "map": map[string]any{"n": int64(7)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n got %#v\nwant %#v", got, want)
	}
	for _, b := range []string{"", "null", " null "} {
		if h, err := decodeHeaders([]byte(b)); err != nil || len(h) != 0 {
			t.Errorf("headers %q = %v, %v; want none", b, h, err)
		}
	}
}

func TestHasNUL(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		`"a\u0000"`:    true,
		`"a\\u0000"`:   false,
		`"a\\\u0000"`:  true,
		`"\u0000"`:     true,
		`"a\\\\u0000"`: false,
		`"none"`:       false,
	} {
		if got := hasNUL([]byte(s)); got != want {
			t.Errorf("hasNUL(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for n, want := range []int{1, 2, 4, 8, 10, 10} {
		if got := backoff(1, 10, n); int(got) != want {
			t.Errorf("backoff(1, 10, %d) = %d, want %d", n, got, want)
		}
	}
	if got := backoff(1, 10, 1<<30); got != 10 {
		t.Errorf("backoff after very many failures = %d", got)
	}
}
